"""POST /jobs/bulk: a dry run counts, then the action runs as a job of its own that pages
through the matches with fenced writes, shows its progress, resumes from its checkpoint
after an admission refusal, and never leaves the caller's tenant (issue 25)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.bulk import run
from leasehold.clock import FakeClock, iso
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy.plans import set_plan
from leasehold.time import ticker
from tests.conftest import MakeApp

from .api_client import ApiClient, api_for
from .helpers import deliver, inject

#: Every DynamoDB write.
WRITES = "|".join(f"dynamodb.{op}" for op in (
    "PutItem", "UpdateItem", "TransactWriteItems", "DeleteItem"))


@pytest.fixture
def api(app: Leasehold, registry: TaskRegistry) -> ApiClient:
    @registry.task("work", max_attempts=1)
    def work(payload: Any, ctx: Any) -> Any:
        if payload.startswith("timeout") and ctx.attempt == 1 and \
                ctx.extra.get("attempt_errors") is None:
            raise TimeoutError("upstream took 30 s")
        return payload

    return ApiClient(app)


def submit(api: ApiClient, payload: str, tenant: str = "acme") -> str:
    reply = api.post("/jobs", {"task": "work", "payload": payload,
                               "labels": {"env": "prod"}}, tenant=tenant)
    assert reply.status == 201, reply.body
    job_id: str = reply.body["job_id"]
    return job_id


def states(app: Leasehold, ids: list[str]) -> list[JobState]:
    return [job.state for job in app.store.batch_get(ids)]


def test_a_dry_run_counts_then_the_bulk_job_retries_each_match_once(
        api: ApiClient, clock: FakeClock) -> None:
    app = api.app
    dead = [submit(api, f"timeout-{i}") for i in range(5)]
    ok = submit(api, "fine")
    rival = submit(api, "timeout-rival", tenant="rival")
    deliver(app)
    assert states(app, dead) == [JobState.DEAD] * 5
    body = {"action": "retry", "filter": {"error_type": "TimeoutError", "label": ["env:prod"]}}
    preview = api.post("/jobs/bulk", {**body, "dry_run": True}, tenant="acme")
    assert preview.status == 200, preview.body
    assert (preview.body["matches"], preview.body["complete"]) == (5, True)
    assert preview.body["sample"] == sorted(dead)  # oldest first (same time: by id)
    assert states(app, dead) == [JobState.DEAD] * 5  # a dry run changes nothing
    started = api.post("/jobs/bulk", body, tenant="acme")
    assert started.status == 202, started.body
    bulk_id = started.body["bulk_id"]
    assert api.get(f"/jobs/bulk/{bulk_id}", tenant="rival").status == 404
    assert api.get(f"/jobs/bulk/{dead[0]}", tenant="acme").status == 404  # not a bulk job
    deliver(app, once=True)  # the bulk job runs: each DEAD job re-queued once
    shown = api.get(f"/jobs/bulk/{bulk_id}", tenant="acme").body
    assert shown["state"] == "SUCCEEDED", shown
    assert shown["result"] == {"action": "retry", "done": 5, "skipped": 0,
                               "created_before": shown["created_before"]}
    assert shown["progress"]["done"] == 5
    assert states(app, dead) == [JobState.QUEUED] * 5
    assert states(app, [ok, rival]) == [JobState.SUCCEEDED, JobState.DEAD]  # untouched
    deliver(app)
    assert states(app, dead) == [JobState.SUCCEEDED] * 5


def test_bad_bulk_requests_are_refused_before_anything_runs(api: ApiClient) -> None:
    refused = api.post("/jobs/bulk", {"action": "retry", "filter": {"state": ["RUNNING"]}},
                       tenant="acme")
    assert refused.status == 422 and "DEAD" in refused.body["error"]["message"]
    assert api.post("/jobs/bulk", {"action": "explode"}, tenant="acme").status == 422
    assert api.get("/jobs", tenant="acme").body["jobs"] == []


def test_an_admission_refusal_pauses_the_bulk_job_and_it_resumes_from_its_checkpoint(
        api: ApiClient, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    app = api.app
    dead = [submit(api, f"timeout-{i}") for i in range(4)]
    deliver(app)
    # The tenant's plan lets it have 3 live jobs: the bulk job itself holds one, so 2
    # retries fit. The API that admits the bulk job and the worker that admits its retries
    # read the same plan.
    set_plan(app, "acme", max_live=3)
    capped = api_for(app)
    bulk_id = capped.post("/jobs/bulk", {"action": "redrive"}, tenant="acme").body["bulk_id"]
    deliver(app, once=True)
    paused = app.store.get(bulk_id)
    assert paused.state is not JobState.SUCCEEDED
    progress = api.get(f"/jobs/bulk/{bulk_id}", tenant="acme").body["progress"]
    assert progress["done"] == 2 and "admission" in progress["paused"]
    assert states(app, dead).count(JobState.QUEUED) == 2
    set_plan(app, "acme", max_live=10_000)  # the deployment's cap again
    for _ in range(10):  # the retry comes back after its backoff and resumes
        clock.advance(150)
        if app.store.get(bulk_id).state is JobState.SUCCEEDED:
            break
        ticker.promote_due(app)
        sweeper.sweep(app)
        deliver(app, once=True)
    done = app.store.get(bulk_id)
    assert done.state is JobState.SUCCEEDED, done.history
    assert {k: v for k, v in done.result.items() if k != "created_before"} == {
        "action": "redrive", "done": 4, "skipped": 0}


def later(api: ApiClient, tag: str, tenant: str = "acme") -> str:
    """A job that waits an hour (SCHEDULED: live, and no message a delivery would run)."""
    reply = api.post("/jobs", {"task": "work", "payload": tag, "delay_seconds": 3600,
                               "labels": {"env": "prod"}}, tenant=tenant)
    assert reply.status == 201, reply.body
    job_id: str = reply.body["job_id"]
    return job_id


def test_a_bulk_action_acts_only_on_jobs_created_up_to_its_request_across_a_crash(
        api: ApiClient, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29, 9: the dry run counted 3, the cancel that followed cancelled 5, two of them
    submitted after it was asked for. A bulk job killed mid-run resumes from its checkpoint
    and still never reaches a job created after its request."""
    app = api.app
    monkeypatch.setattr(run, "PAGE", 2)  # two pages: a checkpoint between them
    before = [later(api, f"before-{i}") for i in range(3)]
    body = {"action": "cancel", "filter": {"label": ["env:prod"]}}
    clock.advance(1)
    preview = api.post("/jobs/bulk", {**body, "dry_run": True}, tenant="acme").body
    assert (preview["matches"], preview["sample"]) == (3, sorted(before))
    clock.advance(1)
    asked_at = app.now()
    started = api.post("/jobs/bulk", body, tenant="acme")
    assert started.status == 202, started.body
    bulk_id = started.body["bulk_id"]
    clock.advance(1)
    after = [later(api, f"after-{i}") for i in range(2)]  # while the bulk job waits to run
    # The worker dies just before it cancels the third job: two are done and checkpointed.
    injector = inject(app, Fault(target=WRITES, kind="crash",
                                 when=lambda params: sorted(before)[2] in json.dumps(params)))
    with pytest.raises(InjectedCrash):
        deliver(app, once=True)
    injector.revive()
    injector.faults.clear()
    midway = app.store.get(bulk_id)
    assert midway.state is JobState.RUNNING, midway.history
    assert json.loads(midway.progress_json or "{}")["done"] == 2
    more = [later(api, f"while-dead-{i}") for i in range(2)]  # before it resumes
    for _ in range(10):  # its lease runs out; the sweeper hands it off again; it resumes
        clock.advance(300)
        sweeper.sweep(app)
        deliver(app, once=True)
        if app.store.get(bulk_id).state is JobState.SUCCEEDED:
            break
    shown = api.get(f"/jobs/bulk/{bulk_id}", tenant="acme").body
    assert shown["state"] == "SUCCEEDED", shown
    assert states(app, before) == [JobState.CANCELLED] * 3
    assert states(app, after + more) == [JobState.SCHEDULED] * 4  # never touched
    assert shown["result"]["done"] == 3 and shown["result"]["skipped"] == 0, shown
    # The bound, shown by both answers and in the result.
    assert started.body["created_before"] == iso(asked_at + 1)
    assert shown["result"]["created_before"] == shown["created_before"] == iso(asked_at + 1)


def test_an_earlier_created_before_of_the_users_is_kept(api: ApiClient,
                                                        clock: FakeClock) -> None:
    app = api.app
    old = later(api, "old")
    clock.advance(60)
    cutoff = app.now()
    newer = later(api, "newer")
    clock.advance(60)
    body = {"action": "cancel", "filter": {"created_before": iso(cutoff)}}
    preview = api.post("/jobs/bulk", {**body, "dry_run": True}, tenant="acme").body
    assert (preview["matches"], preview["created_before"]) == (1, iso(cutoff))
    bulk_id = api.post("/jobs/bulk", body, tenant="acme").body["bulk_id"]
    deliver(app, once=True)
    shown = api.get(f"/jobs/bulk/{bulk_id}", tenant="acme").body
    assert (shown["result"]["done"], shown["created_before"]) == (1, iso(cutoff))
    assert states(app, [old, newer]) == [JobState.CANCELLED, JobState.SCHEDULED]


def test_both_bulk_answers_carry_the_bulk_id(api: ApiClient) -> None:
    """Issue 30, 4: ``GET /jobs/bulk/{id}`` answered without ``bulk_id`` (the CLI's --wait
    crashed on it)."""
    started = api.post("/jobs/bulk", {"action": "cancel"}, tenant="acme")
    followed = api.get(f"/jobs/bulk/{started.body['bulk_id']}", tenant="acme")
    assert followed.status == 200
    assert followed.body["bulk_id"] == started.body["bulk_id"] == started.body["job_id"]
    assert followed.body["created_before"] == started.body["created_before"]


def test_a_bulk_job_runs_on_the_first_python_pool_never_on_an_external_one(
        make_app: MakeApp) -> None:
    # With ``images`` first and external, the bulk job went to ``images`` (``pools[0]``),
    # where only a remote worker leases, and the registered task named a pool ``default``
    # the deployment might not have: it is now on the first Python pool, both ways.
    app = make_app(pools=("images", "work"), external_tasks={"images": ("resize",)})
    api = ApiClient(app)
    assert app.registry.get(run.TASK).pool == "work"
    started = api.post("/jobs/bulk", {"action": "retry", "filter": {}}, tenant="acme")
    assert started.status == 202, started.body
    bulk_id = started.body["bulk_id"]
    assert app.store.get(bulk_id).pool == "work"
    leased = api.post("/workers/lease", {"pool": "images", "wait_seconds": 0})
    assert leased.status == 200 and leased.body["jobs"] == []
    deliver(app, pool="work")
    assert app.store.get(bulk_id).state is JobState.SUCCEEDED
