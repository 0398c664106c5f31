"""A tenant without a cap pays for no slot (issue 32, "options pay for themselves").

Without a cap (``LEASEHOLD_TENANT_MAX_LIVE=0``) a job is admitted by its row's conditional
put (after the rate token's own conditional update) and finished by one conditional update:
no transaction, no slot. A cap set later counts the live jobs in
(``count_in_live_jobs``), exactly, also while workers finish jobs they read before.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any

import pytest
from botocore.exceptions import ClientError

from leasehold.aws.counting import RequestCounter
from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import COUNTED, REPLAY_GRACE_MS, submit
from leasehold.tenancy.backfill import count_in_live_jobs
from leasehold.tenancy.limits import Limits

from .api_client import api_for
from .helpers import deliver, inject, live_counted_jobs, tenant_live

pytestmark = pytest.mark.ddblocal

UNCAPPED = {"rate": 1000, "burst": 1000, "max_live": None}
CAP = Limits(rate=1000, burst=1000, max_live=3)  # 3 admission items of one slot each
ONE_ITEM = Limits(rate=1000, burst=1000, max_live=10, shards=1)


@pytest.fixture
def tasks(registry: TaskRegistry) -> TaskRegistry:
    registry.task("echo")(lambda payload, ctx: payload)
    return registry


def _jobs(app: Leasehold, tenant: str) -> list[Any]:
    ids = [item["job_id"]["S"] for item in app.clients.dynamodb.scan(
        TableName=app.settings.jobs_table, ProjectionExpression="job_id")["Items"]]
    return [job for job in app.store.batch_get(ids) if job.tenant == tenant]


def test_a_tenant_without_a_cap_is_admitted_by_one_put_and_finished_by_one_update(
        app: Leasehold, tasks: TaskRegistry) -> None:
    api = api_for(app, **UNCAPPED)
    counter = RequestCounter().attach(app.clients)
    reply = api.post("/jobs", {"task": "echo"}, tenant="acme")
    assert reply.status == 201, reply.body
    admitted = counter.snapshot()
    # The row's put and the rate token's update; no transaction, no slot.
    assert admitted.requests["dynamodb.TransactWriteItems"] == 0, admitted
    assert admitted.requests["dynamodb.PutItem"] == 1, admitted
    assert admitted.requests["dynamodb.UpdateItem"] == 1, admitted
    assert deliver(app) == 1
    finished = counter.snapshot().minus(admitted)
    assert finished.requests["dynamodb.TransactWriteItems"] == 0, finished
    job = app.store.get(reply.body["job_id"])
    assert job.state is JobState.SUCCEEDED and job.extra.get(COUNTED) is False  # admitted
    assert tenant_live(app, "acme") == live_counted_jobs(app, "acme") == 0


@pytest.mark.parametrize("kind", ["lose", "throttle"])
def test_a_lost_or_throttled_put_of_an_uncapped_tenant_makes_one_job(
        app: Leasehold, tasks: TaskRegistry, kind: str) -> None:
    api = api_for(app, **UNCAPPED)
    inject(app, Fault(target="dynamodb.PutItem", kind=kind, times=2))
    reply = api.post("/jobs", {"task": "echo"}, tenant="acme")
    assert reply.status == 201, reply.body  # the retry met its own row: created, once
    [job] = _jobs(app, "acme")
    assert job.job_id == reply.body["job_id"]
    assert deliver(app) == 1
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED


def test_a_put_lost_past_the_retries_is_one_job_when_the_client_sends_its_key_again(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    api = api_for(app, **UNCAPPED)
    inject(app, Fault(target="dynamodb.PutItem", kind="lose-raise"))
    body = {"task": "echo", "idempotency_key": "k1"}
    with contextlib.suppress(ClientError):  # the caller saw an error; the row landed
        api.post("/jobs", body, tenant="acme")
    clock.advance(REPLAY_GRACE_MS / 1000)  # the client retries after a while
    again = api.post("/jobs", body, tenant="acme")
    assert again.status == 200, again.body  # the row the first try wrote
    assert len(_jobs(app, "acme")) == 1
    deliver(app)
    assert app.store.get(again.body["job_id"]).state is JobState.SUCCEEDED


def test_a_cap_set_while_jobs_are_live_counts_them_in_and_holds_from_then_on(
        app: Leasehold, tasks: TaskRegistry) -> None:
    uncapped = api_for(app, **UNCAPPED)
    for _ in range(4):
        assert uncapped.post("/jobs", {"task": "echo"}, tenant="acme").status == 201
    assert tenant_live(app, "acme") == live_counted_jobs(app, "acme") == 0
    assert count_in_live_jobs(app, CAP) == 4
    assert tenant_live(app, "acme") == live_counted_jobs(app, "acme") == 4
    assert count_in_live_jobs(app, CAP) == 0  # idempotent: nothing counted twice
    capped = api_for(app, rate=1000, burst=1000, max_live=CAP.max_live)
    over = capped.post("/jobs", {"task": "echo"}, tenant="acme")
    assert over.status == 429, over.body  # 4 live, counted in over the cap of 3
    deliver(app)
    assert tenant_live(app, "acme") == live_counted_jobs(app, "acme") == 0
    assert capped.post("/jobs", {"task": "echo"}, tenant="acme").status == 201


def test_a_job_counted_in_while_it_runs_gives_its_slot_back_when_it_ends(
        app: Leasehold, registry: TaskRegistry) -> None:
    # The worker read the row uncounted (at its lease); the count-in marks it while the
    # task runs; the worker's finish, written from its stale view, must still give the
    # slot back, or the counter leaks one for ever.
    @registry.task("count_in_midway")
    def midway(payload: Any, ctx: Any) -> Any:
        assert count_in_live_jobs(app, CAP) == 1
        assert tenant_live(app, "acme") == 1
        return payload

    api = api_for(app, **UNCAPPED)
    job_id = api.post("/jobs", {"task": "count_in_midway"}, tenant="acme").body["job_id"]
    assert deliver(app) == 1
    job = app.store.get(job_id)
    assert job.state is JobState.SUCCEEDED and job.extra.get(COUNTED)
    assert tenant_live(app, "acme") == live_counted_jobs(app, "acme") == 0


def test_a_count_in_killed_part_way_stays_exact_and_a_second_run_finishes_it(
        app: Leasehold, tasks: TaskRegistry) -> None:
    uncapped = api_for(app, **UNCAPPED)
    for _ in range(4):
        assert uncapped.post("/jobs", {"task": "echo"}, tenant="acme").status == 201
    calls = itertools.count(1)
    injector = inject(app, Fault(target="dynamodb.TransactWriteItems", kind="crash",
                                 when=lambda _: next(calls) == 3))
    with pytest.raises(InjectedCrash):
        count_in_live_jobs(app, ONE_ITEM)  # killed before its third job's transaction
    injector.revive()
    injector.faults.clear()
    assert tenant_live(app, "acme") == live_counted_jobs(app, "acme") == 2
    assert count_in_live_jobs(app, ONE_ITEM) == 2
    assert tenant_live(app, "acme") == live_counted_jobs(app, "acme") == 4


def test_a_lost_response_on_a_count_in_counts_the_job_once(
        app: Leasehold, tasks: TaskRegistry) -> None:
    uncapped = api_for(app, **UNCAPPED)
    assert uncapped.post("/jobs", {"task": "echo"}, tenant="acme").status == 201
    inject(app, Fault(target="dynamodb.TransactWriteItems", kind="lose-raise"))
    with contextlib.suppress(Exception):
        count_in_live_jobs(app, CAP)
    count_in_live_jobs(app, CAP)
    assert tenant_live(app, "acme") == live_counted_jobs(app, "acme") == 1


def test_a_count_in_leaves_library_jobs_alone(app: Leasehold, tasks: TaskRegistry) -> None:
    # A library job holds no slot with or without a cap: only admitted rows are counted in.
    library = submit(app, JobSpec(task="echo", tenant="acme")).job
    uncapped = api_for(app, **UNCAPPED)
    assert uncapped.post("/jobs", {"task": "echo"}, tenant="acme").status == 201
    assert count_in_live_jobs(app, CAP) == 1
    assert tenant_live(app, "acme") == live_counted_jobs(app, "acme") == 1
    assert COUNTED not in app.store.get(library.job_id).extra
    deliver(app)
    assert tenant_live(app, "acme") == live_counted_jobs(app, "acme") == 0


def test_a_cap_lifted_while_counted_jobs_are_live_still_gives_their_slots_back(
        app: Leasehold, tasks: TaskRegistry) -> None:
    capped = api_for(app, rate=1000, burst=1000, max_live=CAP.max_live)
    for _ in range(2):
        assert capped.post("/jobs", {"task": "echo"}, tenant="acme").status == 201
    uncapped = api_for(app, **UNCAPPED)
    assert uncapped.post("/jobs", {"task": "echo"}, tenant="acme").status == 201
    assert tenant_live(app, "acme") == live_counted_jobs(app, "acme") == 2
    deliver(app)
    assert tenant_live(app, "acme") == live_counted_jobs(app, "acme") == 0


def test_the_cap_setting_zero_means_no_cap() -> None:
    from leasehold.settings import Settings

    settings = Settings.from_env({"LEASEHOLD_TENANT_MAX_LIVE": "0"})
    assert Limits.from_settings(settings).max_live is None
    assert not Limits.from_settings(settings).capped
    assert Limits.from_settings(Settings.from_env({})).max_live == 10_000
