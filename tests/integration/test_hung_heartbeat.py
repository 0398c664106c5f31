"""A heartbeat hung on its socket: the attempt stops by its own clock, before the sweeper's cutoff.

Against a real moto server process (the emulator), with the wall clock and a scaled-down lease
(5 s, skew grace 1 s). The first worker's heartbeats go to a socket that accepts and
never answers (``hang`` in ``aws/faults.py``), so botocore would wait 30 s a try, 9 tries. The
sweeper and a second worker run beside it as they would in production.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from leasehold.aws.clients import Clients
from leasehold.aws.faults import Fault, FaultInjector
from leasehold.aws.provision import create_all
from leasehold.clock import FakeClock, SystemClock
from leasehold.compose import compose
from leasehold.core.context import JobContext
from leasehold.core.jobs import Job
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.worker import Delivery, Outcome, Worker
from leasehold.settings import Settings

from .helpers import deliver, receive_all, submit_swept

#: Long enough that the lease's own round trip to the emulator fits in it on a loaded machine:
#: at 3 s a lease under load came back already expired ("ran out before it was granted"),
#: so the first attempt never ran and the test saw only the second.
LEASE_S = 5.0
GRACE_S = 1.0


def is_heartbeat(params: Mapping[str, Any]) -> bool:
    # Fenced on RUNNING, owner and epoch; a lease appends history, a finish names its source.
    values = params.get("ExpressionAttributeValues", {})
    return ":running" in values and ":source" not in values \
        and "list_append" not in params.get("UpdateExpression", "")


@dataclass
class Run:
    attempt: int
    ctx: JobContext
    running: bool = True
    told_at: int | None = None  # when the handler saw ``ctx.cancelled`` (epoch ms)
    hanging_when_told: int = 0  # heartbeat calls the black hole still held then


@dataclass
class Setup:
    first: Leasehold   # the worker whose heartbeats hang
    second: Leasehold  # the sweeper and the second worker: healthy clients
    injector: FaultInjector
    registry: TaskRegistry


@pytest.fixture
def setup(endpoint: str) -> Iterator[Setup]:
    prefix = "h" + uuid.uuid4().hex[:8]
    settings = Settings(
        endpoint_url=endpoint, jobs_table=f"{prefix}-jobs",
        schedules_table=f"{prefix}-schedules", tenants_table=f"{prefix}-tenants",
        coordination_table=f"{prefix}-coord", workflows_table=f"{prefix}-workflows",
        queue_prefix=prefix, shards=1, lease_seconds=LEASE_S,
        skew_grace_seconds=GRACE_S, pools=("default",))
    injector = FaultInjector([Fault(target="dynamodb.UpdateItem", kind="hang", times=None,
                                    when=is_heartbeat)])
    registry = TaskRegistry()
    healthy = Clients(settings)
    create_all(healthy, settings)
    clock = SystemClock()  # the worker's clock is the app's: here the wall clock
    first = compose(settings, clock=clock, registry=registry,
                    clients=Clients(settings, faults=injector))
    second = compose(settings, clock=clock, registry=registry, clients=healthy)
    try:
        yield Setup(first, second, injector, registry)
    finally:
        # Let go of the abandoned heartbeat: its retry meets a row that moved on and is refused.
        injector.close()


@pytest.mark.parametrize("beat_from", ["worker", "handler"])
def test_a_hung_heartbeat_stops_the_handler_before_the_sweepers_cutoff(
        setup: Setup, beat_from: str) -> None:
    first, second, injector = setup.first, setup.second, setup.injector
    runs: list[Run] = []
    overlaps = []
    lock = threading.Lock()

    @setup.registry.task("guarded")
    def guarded(payload: Any, ctx: JobContext) -> Any:
        with lock:
            # Two at once: a handler starts while another one runs that was not told to stop.
            overlaps.extend(r.attempt for r in runs if r.running and not r.ctx.cancelled)
            run = Run(ctx.attempt, ctx)
            runs.append(run)
        try:
            if ctx.attempt > 1:
                return "second"
            if beat_from == "handler":
                ctx.heartbeat({"step": 1})  # hangs; returns when the lease has run out
            if ctx.wait_cancelled(LEASE_S + GRACE_S + 3):
                run.told_at = first.now()
                run.hanging_when_told = injector.hanging
            return "first"
        finally:
            run.running = False

    leased: list[Job] = []
    first.store.observers.append(
        lambda job, source: leased.append(job) if job.state is JobState.RUNNING else None)
    job = submit_swept(second, JobSpec(task="guarded")).job
    [message] = receive_all(first)
    returned, _ = _first_worker(first, message.body, injector)
    # The sweeper re-drives the job as soon as its cutoff passes; a second worker takes it.
    give_up = time.monotonic() + LEASE_S + GRACE_S + 10
    while not sweeper.sweep(second).recovered and time.monotonic() < give_up:
        time.sleep(0.05)
    deliver(second, Worker(second, worker_id="second"))
    for _ in range(100):
        if "outcome" in returned or not runs or not runs[0].running:
            break
        time.sleep(0.05)

    [lease] = leased
    assert lease.lease_expires_at is not None
    deadline = lease.lease_expires_at  # no heartbeat ever landed: the lease as taken
    cutoff = deadline + int(GRACE_S * 1000)
    assert [r.attempt for r in runs] == [1, 2]
    assert overlaps == []
    told = runs[0].told_at
    assert told is not None, "the first handler was never told to stop"
    # Told only once the lease really ran out by the worker's clock, and before the cutoff.
    assert deadline <= told < cutoff, (told - deadline, "ms after the lease ran out")
    # The heartbeat call was cut short, not waited out: it was still hung at that moment.
    assert runs[0].hanging_when_told >= 1
    assert returned["outcome"] is Outcome.LEASE_LOST
    assert returned["at"] < cutoff  # the attempt gave its claim up, and wrote nothing
    done = second.store.get(job.job_id)
    assert (done.state, done.result, done.attempt) == (JobState.SUCCEEDED, "second", 2)
    assert done.progress_json is None  # the hung heartbeat never landed


def is_finish(params: Mapping[str, Any]) -> bool:
    # A transition names its source state; a transaction carries one as its first item.
    return ":source" in str(params.get("ExpressionAttributeValues", {})) or \
        ":source" in str(params.get("TransactItems", ""))


def _first_worker(first: Leasehold, body: str, injector: FaultInjector
                  ) -> tuple[dict[str, Any], threading.Thread]:
    """The first worker processes ``body`` on a thread of its own; what it returned, when, and
    how many hung calls were still held then, land in the dict."""
    returned: dict[str, Any] = {}

    def run() -> None:
        returned["outcome"] = Worker(first, worker_id="first").process(Delivery(body))
        returned["at"] = first.now()
        returned["hanging"] = injector.hanging

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return returned, thread


def test_a_hung_outcome_write_is_given_up_when_the_lease_runs_out(setup: Setup) -> None:
    first, second, injector = setup.first, setup.second, setup.injector
    injector.faults[:] = [Fault(target="dynamodb.UpdateItem|dynamodb.TransactWriteItems",
                                kind="hang", times=None, when=is_finish)]
    setup.registry.task("quick")(lambda payload, ctx: f"attempt {ctx.attempt}")
    leased: list[Job] = []
    first.store.observers.append(
        lambda job, source: leased.append(job) if job.state is JobState.RUNNING else None)
    job = submit_swept(second, JobSpec(task="quick")).job
    [message] = receive_all(first)
    returned, thread = _first_worker(first, message.body, injector)
    thread.join(LEASE_S + GRACE_S + 3)  # botocore alone would wait 30 s a try, 9 tries

    [lease] = leased
    assert lease.lease_expires_at is not None
    deadline, cutoff = lease.lease_expires_at, lease.lease_expires_at + int(GRACE_S * 1000)
    assert returned.get("outcome") is Outcome.LEASE_LOST
    assert deadline <= returned["at"] < cutoff
    assert returned["hanging"] >= 1  # the write was still hung: it was cut short
    # The job is the sweeper's: re-driven past the cutoff and run by a healthy worker.
    give_up = time.monotonic() + LEASE_S + GRACE_S + 10
    while not sweeper.sweep(second).recovered and time.monotonic() < give_up:
        time.sleep(0.05)
    deliver(second, Worker(second, worker_id="second"))
    done = second.store.get(job.job_id)
    assert (done.state, done.result, done.attempt) == (JobState.SUCCEEDED, "attempt 2", 2)


def test_a_lease_granted_only_after_it_ran_out_never_starts_the_handler(
        make_app: Any, clock: FakeClock, registry: TaskRegistry) -> None:
    app = make_app(lease_seconds=LEASE_S, skew_grace_seconds=GRACE_S)
    runs: list[int] = []
    registry.task("counted")(lambda payload, ctx: runs.append(ctx.attempt))
    job = submit_swept(app, JobSpec(task="counted")).job

    def slow_lease(request: Any, **_: Any) -> None:
        if b"list_append" in (request.body or b""):  # the lease: its call takes a lease long
            clock.advance(LEASE_S)

    app.clients.dynamodb.meta.events.register_first("before-send.dynamodb.UpdateItem",
                                                    slow_lease)
    [message] = receive_all(app)
    assert Worker(app).process(Delivery(message.body)) is Outcome.LEASE_LOST
    assert runs == []
    app.clients.dynamodb.meta.events.unregister("before-send.dynamodb.UpdateItem", slow_lease)
    clock.advance(GRACE_S + 1)
    assert sweeper.sweep(app).recovered == 1
    deliver(app)
    assert runs == [2]
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
