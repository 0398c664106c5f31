"""A cap without transactions (issue 46): a capped job's slot is taken by its own
conditional update before its row is put, and given back by one after its terminal write.
The cap is never exceeded; a slot a fault left counted with no job is returned by the
sweeper's repair within 2 minutes, measured with the injected clock (docs/design.md,
"A cap without transactions").
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from leasehold.aws.counting import RequestCounter
from leasehold.aws.faults import Fault, FaultInjector, InjectedCrash
from leasehold.clock import FakeClock
from leasehold.core.ids import listed_at_home
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import LeaseholdError, RateLimited
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import ADMISSION_SHARD, SLOT_AT
from leasehold.lifecycle.worker import Delivery, Worker
from leasehold.tenancy import slots
from leasehold.tenancy.admission import Limits, submit_admitted

from .api_client import api_for
from .helpers import deliver, inject, live_counted_jobs, receive_all, server_app, tenant_live


@pytest.fixture
def tasks(registry: TaskRegistry) -> TaskRegistry:
    registry.task("echo")(lambda payload, ctx: payload)

    def fail(payload: Any, ctx: Any) -> None:
        raise RuntimeError("no")

    registry.task("fail", max_attempts=1)(fail)
    return registry


def _taking(app: Leasehold) -> Any:
    """A fault filter: a submission's update that takes its slot."""
    def when(params: Mapping[str, Any]) -> bool:
        return params.get("TableName") == app.settings.tenants_table and \
            "#slast" in str(params.get("UpdateExpression", ""))
    return when


def _giving_back(app: Leasehold) -> Any:
    """A fault filter: the update that gives a slot back after its job ended."""
    def when(params: Mapping[str, Any]) -> bool:
        return params.get("TableName") == app.settings.tenants_table and \
            ":minus, #out :one" in str(params.get("UpdateExpression", ""))
    return when


def _give_back_faulted(app: Leasehold, kind: str, times: int = 1) -> FaultInjector:
    """``kind`` on the give-back, installed on the client that makes it."""
    injector = FaultInjector([Fault(target="dynamodb.UpdateItem", kind=kind, times=times,
                                    when=_giving_back(app))])
    injector.install(app.clients.client("dynamodb", once=True))
    return injector


def _orphans(app: Leasehold, api: Any) -> int:
    return int(api.get("/stats").body["orphan_slots"])


def test_a_capped_job_is_admitted_and_finished_without_a_transaction(
        app: Leasehold, tasks: TaskRegistry) -> None:
    api = api_for(app, max_live=2)
    counter = RequestCounter().attach(app.clients)
    job_id = api.post("/jobs", {"task": "echo"}).body["job_id"]
    job = app.store.get(job_id)
    assert job.extra[SLOT_AT] and tenant_live(app) == live_counted_jobs(app) == 1
    assert deliver(app) == 1
    assert app.store.get(job_id).state is JobState.SUCCEEDED
    assert tenant_live(app) == live_counted_jobs(app) == 0
    assert counter.snapshot().calls["dynamodb.TransactWriteItems"] == 0
    # Its outcome is counted with the give-back, for /stats.
    assert api.get("/stats").body["jobs"]["SUCCEEDED"] == 1


def test_a_capped_job_whose_worker_died_is_taken_over_by_the_sweeper_after_its_lease(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    """A capped job keeps its ``sweep`` entry (it is not sent first): a lost worker's job is
    re-driven by the sweeper once its lease ends, as the worker protocol promises, not
    when SQS's visibility timeout (300 s) brings its message back. Its slot is held
    through the re-run and given back once at its end."""
    api = api_for(app, max_live=1)
    job_id = api.post("/jobs", {"task": "echo"}).body["job_id"]
    [message] = receive_all(app)
    taken = Worker(app).take(Delivery(message.body, message.queue_url, message.receipt_handle))
    assert isinstance(taken, tuple)  # leased; its worker dies now, its message in flight
    clock.advance(app.settings.lease_seconds + app.settings.skew_grace_seconds + 1)
    assert sweeper.sweep(app).recovered == 1
    assert tenant_live(app) == live_counted_jobs(app) == 1
    assert deliver(app) == 1  # the re-drive's message, long before the old one's returns
    done = app.store.get(job_id)
    assert (done.state, done.attempt, done.crash_count) == (JobState.SUCCEEDED, 2, 1)
    assert tenant_live(app) == live_counted_jobs(app) == 0


@pytest.mark.parametrize("end", ["SUCCEEDED", "DEAD", "CANCELLED"])
def test_every_end_of_a_capped_job_gives_its_slot_back_once_and_counts_its_outcome(
        app: Leasehold, tasks: TaskRegistry, end: str) -> None:
    api = api_for(app, max_live=1)
    job_id = api.post("/jobs", {"task": "fail" if end == "DEAD" else "echo"}).body["job_id"]
    if end == "CANCELLED":
        assert api.delete(f"/jobs/{job_id}").status == 200
    deliver(app)
    assert app.store.get(job_id).state.value == end
    assert tenant_live(app) == live_counted_jobs(app) == 0
    assert api.get("/stats").body["jobs"][end] == 1
    assert [api.post("/jobs", {"task": "echo"}).status for _ in range(2)] == [201, 429]


def test_a_lost_response_on_the_slot_takes_it_once_below_the_cap(
        app: Leasehold, tasks: TaskRegistry) -> None:
    # Room for a second slot: botocore's retry of the landed update would take it too,
    # but the item names the first try as this submission's, so the retry is refused.
    api = api_for(app, max_live=5, shards=1)
    inject(app, Fault(target="dynamodb.UpdateItem", kind="lose", when=_taking(app)))
    assert api.post("/jobs", {"task": "echo"}).status == 201
    assert tenant_live(app) == live_counted_jobs(app) == 1


def test_a_slot_whose_caller_saw_an_error_is_returned_by_the_repair_within_two_minutes(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    api = api_for(app, max_live=1)
    inject(app, Fault(target="dynamodb.UpdateItem", kind="lose-raise", when=_taking(app)))
    assert api.post("/jobs", {"task": "echo"}).status >= 500  # landed; the caller saw an error
    # Counted with no job: never the reverse, and the cap holds it until the repair.
    assert tenant_live(app) == 1 and live_counted_jobs(app) == 0
    assert api.post("/jobs", {"task": "echo"}).status == 429
    clock.advance(29)  # its bucket has not closed: a put may still land
    assert sweeper.sweep(app).repaired["slots"] == 0 and tenant_live(app) == 1
    clock.advance(31)  # 60 s after: closed, whatever the bucket
    assert _orphans(app, api) == 1  # /stats shows it while it exists
    assert sweeper.sweep(app).repaired["slots"] == 1
    assert tenant_live(app) == live_counted_jobs(app) == 0 == _orphans(app, api)
    assert api.post("/jobs", {"task": "echo"}).status == 201


def test_a_process_killed_between_the_slot_and_the_put_leaves_an_orphan_the_repair_returns(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    api = api_for(app, max_live=1)
    injector = inject(app, Fault(target="dynamodb.PutItem", kind="crash"))
    with contextlib.suppress(InjectedCrash):
        api.post("/jobs", {"task": "echo"})
    assert injector.dead
    injector.revive()
    assert tenant_live(app) == 1 and live_counted_jobs(app) == 0
    clock.advance(60)
    assert sweeper.sweep(app).repaired["slots"] == 1
    assert tenant_live(app) == live_counted_jobs(app) == 0
    assert deliver(app) == 0  # killed before its put, and its send after it: nothing runs
    assert api.post("/jobs", {"task": "echo"}).status == 201


def test_a_process_killed_between_the_terminal_write_and_the_give_back(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    api = api_for(app, max_live=1)
    job_id = api.post("/jobs", {"task": "echo"}).body["job_id"]
    injector = _give_back_faulted(app, "crash")
    with contextlib.suppress(InjectedCrash):
        deliver(app)
    assert injector.dead
    assert app.store.get(job_id).state is JobState.SUCCEEDED
    assert tenant_live(app) == 1 and live_counted_jobs(app) == 0
    clock.advance(20)  # ended 20 s ago: its give-back might still be on its way
    assert sweeper.sweep(app).repaired["slots"] == 0 and tenant_live(app) == 1
    clock.advance(40)
    assert _orphans(app, api) == 1
    assert sweeper.sweep(app).repaired["slots"] == 1
    assert tenant_live(app) == 0 == _orphans(app, api)
    assert api.post("/jobs", {"task": "echo"}).status == 201


@pytest.mark.parametrize("kind", ["lose", "throttle", "fail", "hang"])
def test_a_give_back_under_a_fault_returns_the_slot_once(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry, kind: str) -> None:
    """A lost response: it landed, and is never made twice (no retry). A throttle: it did
    not land, and is tried again. A failure or a hung call: not known; the repair returns
    it. Either way the slot comes back exactly once, and the cap admits exactly its size."""
    api = api_for(app, max_live=2, shards=1)
    first = api.post("/jobs", {"task": "echo"}).body["job_id"]
    _give_back_faulted(app, kind, times=2 if kind == "throttle" else 1)
    deliver(app)
    assert app.store.get(first).state is JobState.SUCCEEDED
    held = tenant_live(app)
    assert held == (1 if kind in ("fail", "hang") else 0)
    clock.advance(60)
    sweeper.sweep(app)
    assert tenant_live(app) == live_counted_jobs(app) == 0
    assert [api.post("/jobs", {"task": "echo"}).status for _ in range(3)] == [201, 201, 429]
    assert tenant_live(app) == live_counted_jobs(app) == 2


def test_a_give_back_still_on_its_way_is_not_taken_for_an_orphan(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    """The repair counts a job that ended within the settle time as holding its slot: its
    give-back (here, a call hung past the repair) lands after, once."""
    api = api_for(app, max_live=5, shards=1)
    waiting = api.post("/jobs", {"task": "echo", "delay_seconds": 600}).body["job_id"]
    ending = api.post("/jobs", {"task": "echo"}).body["job_id"]
    slot_at = int(app.store.get(ending).extra[SLOT_AT])
    assert slots.bucket_of(slot_at) == slots.bucket_of(
        int(app.store.get(waiting).extra[SLOT_AT]))
    clock.advance(40)
    _give_back_faulted(app, "fail")  # the worker's give-back does not land now ...
    deliver(app)
    assert app.store.get(ending).state is JobState.SUCCEEDED
    assert app.store.get(waiting).state is JobState.QUEUED
    clock.advance(25)  # their bucket has closed (65 s after); the job ended 25 s ago
    sweeper.sweep(app)
    assert tenant_live(app) == 2
    # ... it lands now (a hung call arriving late): the counters are exact, never under.
    assert slots.give_back(app, "default", 0, slot_at, JobState.SUCCEEDED)
    assert tenant_live(app) == live_counted_jobs(app) == 1


def test_a_repair_keeps_the_slots_of_live_jobs_listed_from_their_home_and_from_the_index(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    """A plain capped job has no listing-index entry (its home lists it, issue 46); a keyed
    one has. A repair that read only the index would count the plain job absent and return
    the slot it still holds, letting the cap be passed. It reads both, as the listing does:
    it returns the one orphan, and the counter never drops below the live counted jobs."""
    api = api_for(app, max_live=3)
    plain = api.post("/jobs", {"task": "echo"}).body["job_id"]
    keyed = api.post("/jobs", {"task": "echo", "idempotency_key": "k"}).body["job_id"]
    made = {job_id: app.store.get(job_id) for job_id in (plain, keyed)}
    listed = {job_id: listed_at_home(job_id, "default", job.created_at,
                                     app.settings.tenant_shards)
              for job_id, job in made.items()}
    assert listed == {plain: True, keyed: False}  # one from its home, one from the index
    assert all(job.extra[SLOT_AT] for job in made.values())
    inject(app, Fault(target="dynamodb.UpdateItem", kind="lose-raise", when=_taking(app)))
    assert api.post("/jobs", {"task": "echo"}).status >= 500  # an orphan beside them
    assert tenant_live(app) == 3 and live_counted_jobs(app) == 2
    clock.advance(60)  # every bucket closed; both jobs still queued
    assert sweeper.sweep(app).repaired["slots"] == 1
    assert tenant_live(app) == live_counted_jobs(app) == 2
    clock.advance(120)  # later passes return nothing more
    assert sweeper.sweep(app).repaired["slots"] == 0
    assert tenant_live(app) == live_counted_jobs(app) == 2
    assert [api.post("/jobs", {"task": "echo"}).status for _ in range(2)] == [201, 429]


def test_a_give_back_to_a_bucket_the_repair_closed_is_refused(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    api = api_for(app, max_live=5, shards=1)
    ended = api.post("/jobs", {"task": "echo"}).body["job_id"]
    _give_back_faulted(app, "fail")
    deliver(app)
    job = app.store.get(ended)
    clock.advance(60)
    assert sweeper.sweep(app).repaired["slots"] == 1
    live = api.post("/jobs", {"task": "echo"}).body["job_id"]  # a slot in a later bucket
    # The failed give-back, had it landed after all this (past every bound), is refused:
    # the bucket it names is gone, so it cannot take the live job's slot away.
    assert not slots.give_back(app, "default", int(job.extra.get(ADMISSION_SHARD) or 0),
                               int(job.extra[SLOT_AT]), JobState.SUCCEEDED)
    assert app.store.get(live).state is JobState.QUEUED
    assert tenant_live(app) == live_counted_jobs(app) == 1


def test_a_replay_refused_at_the_cap_is_answered_from_its_job(
        app: Leasehold, tasks: TaskRegistry) -> None:
    api = api_for(app, max_live=1)
    body = {"task": "echo", "idempotency_key": "k"}
    assert api.post("/jobs", body).status == 201
    replay = api.post("/jobs", body)
    assert replay.status == 200, replay.body
    assert tenant_live(app) == live_counted_jobs(app) == 1


def test_concurrent_submissions_under_lost_responses_never_pass_the_cap(
        endpoint: str) -> None:
    """16 threads against a moto server, a cap of 10 over 4 items, a third of the slot
    updates' responses lost: at most 10 admitted, never fewer slots than jobs; every slot
    back after the jobs end and the repair runs."""
    registry = TaskRegistry()
    registry.task("echo")(lambda payload, ctx: payload)
    clock = FakeClock()
    app = server_app(endpoint, registry, clock)
    inject(app, Fault(target="dynamodb.UpdateItem", kind="lose", rate=0.33, times=None,
                      when=_taking(app)), seed=7)
    limits = Limits(rate=1000, burst=1000, max_live=10, shards=4)
    answers: Counter[str] = Counter()
    lock = threading.Lock()

    def client(n: int) -> None:
        for i in range(3):
            try:
                submit_admitted(app, JobSpec(task="echo", payload=[n, i]), "default", limits)
                outcome = "admitted"
            except RateLimited:
                outcome = "at the cap"
            except LeaseholdError as exc:
                outcome = type(exc).__name__
            with lock:
                answers[outcome] += 1

    threads = [threading.Thread(target=client, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers["admitted"] <= 10, answers
    assert answers["admitted"] == live_counted_jobs(app) <= tenant_live(app, shards=4) <= 10
    assert answers["at the cap"] > 0, answers
    deliver(app)
    clock.advance(60)
    sweeper.sweep(app)
    assert tenant_live(app, shards=4) == live_counted_jobs(app) == 0
