"""The sweep index written once per job (issue 32): the entry a row gets when it is handed off
stays when the job is leased and when it finishes, and the sweeper passes each entry once, as
it falls due, from a frontier (``lifecycle/sweep_frontier.py``; docs/design.md, "The sweep
index"). These tests break the frontier where it could lose a job: a row that changes under
the pass, a pass killed or refused before it saves the frontier, a long run of entries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest

from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.clock import FakeClock
from leasehold.core.ids import shard_of
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle import sweep_frontier, sweeper
from leasehold.lifecycle.app import Leasehold

from .helpers import deliver, inject, receive_all, submit_swept
from .test_sweep_index import assert_sweep_invariant, is_move, lease, past_the_lease, row


@pytest.fixture
def tasks(registry: TaskRegistry) -> TaskRegistry:
    registry.task("echo")(lambda payload, ctx: payload)
    return registry


def index_keys(item: Mapping[str, Any]) -> tuple[Any, Any]:
    return item.get("sweep_shard"), item.get("sweep_at")


def is_frontier_save(params: Mapping[str, Any]) -> bool:
    return str(params.get("Key", {}).get("pk", {}).get("S")) == "sweep"


def past_the_bound(app: Leasehold, clock: FakeClock) -> None:
    """Past a fresh entry's ``sweep_at`` (``now + lease - grace``) and the grace: due."""
    clock.advance(app.settings.lease_seconds + 1)


@contextmanager
def jobs_table_writes(app: Leasehold) -> Iterator[list[str]]:
    """The write operations made on the jobs table inside the block."""
    writes: list[str] = []

    def record(params: Mapping[str, Any], model: Any, **_: Any) -> None:
        tables = [params.get("TableName")] + [
            op.get(kind, {}).get("TableName") for op in params.get("TransactItems", [])
            for kind in ("Put", "Update", "Delete", "ConditionCheck")]
        if app.settings.jobs_table in tables and model.name in (
                "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems",
                "BatchWriteItem"):
            writes.append(model.name)

    events = app.clients.dynamodb.meta.events
    events.register("before-call.dynamodb.*", record)
    try:
        yield writes
    finally:
        events.unregister("before-call.dynamodb.*", record)


@contextmanager
def index_write_units(app: Leasehold, index: str) -> Iterator[list[float]]:
    """The write units DynamoDB reports for ``index`` on every jobs-table write in the block
    (``ReturnConsumedCapacity=INDEXES``)."""
    units: list[float] = []

    def ask(params: dict[str, Any], **_: Any) -> None:
        params["ReturnConsumedCapacity"] = "INDEXES"

    def read(parsed: Mapping[str, Any], **_: Any) -> None:
        consumed = parsed.get("ConsumedCapacity")
        for entry in consumed if isinstance(consumed, list) else [consumed or {}]:
            if entry.get("TableName") == app.settings.jobs_table:
                units.append(float(entry.get("GlobalSecondaryIndexes", {})
                                   .get(index, {}).get("CapacityUnits", 0.0)))

    events = app.clients.dynamodb.meta.events
    for op in ("PutItem", "UpdateItem", "TransactWriteItems"):
        events.register(f"provide-client-params.dynamodb.{op}", ask)
        events.register(f"after-call.dynamodb.{op}", read)
    try:
        yield units
    finally:
        for op in ("PutItem", "UpdateItem", "TransactWriteItems"):
            events.unregister(f"provide-client-params.dynamodb.{op}", ask)
            events.unregister(f"after-call.dynamodb.{op}", read)


@pytest.mark.ddblocal
def test_a_job_handed_off_leased_and_finished_writes_its_sweep_entry_once(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry, backend: str) -> None:
    with index_write_units(app, "sweep") as units:
        job = submit_swept(app, JobSpec(task="echo")).job
        entered = index_keys(row(app, job.job_id))
        assert None not in entered
        assert deliver(app) == 1  # the lease, the run, the finish
    finished = row(app, job.job_id)
    assert finished["state"] == JobState.SUCCEEDED.value
    # Neither the lease nor the finish touched the entry: no index write.
    assert index_keys(finished) == entered
    if backend == "ddblocal":  # DynamoDB itself: 1 unit on the put, none after
        assert units[0] == 1.0 and sum(units) == 1.0, units
    # The sweeper passes the entry once, when it falls due: a read, no write.
    past_the_bound(app, clock)
    with jobs_table_writes(app) as writes:
        report = sweeper.sweep(app)
    assert (report.examined, report.passed, report.moved) == (1, 1, 0)
    assert writes == []
    shard = shard_of(job.job_id, app.settings.shards)
    assert sweep_frontier.load(app)[shard] > entered[1]
    assert sweeper.sweep(app).examined == 0  # never read again
    assert_sweep_invariant(app)


def test_a_job_leased_under_the_sweepers_move_is_moved_to_its_lease_and_recovered(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    # The sweeper reads the job QUEUED, past its bound; a worker leases it before the move.
    # The move is refused; the frontier must not pass the entry with the row RUNNING and
    # its entry left behind: the pass reads the row again and moves it to its lease.
    job = submit_swept(app, JobSpec(task="echo")).job
    past_the_bound(app, clock)
    receive_all(app)  # the worker holds the message ...
    leased: list[int] = []

    def lease_first(**kwargs: Any) -> None:
        if not leased and is_move(kwargs.get("params", {})):
            leased.append(lease(app, job.job_id))

    app.clients.dynamodb.meta.events.register_first(
        "provide-client-params.dynamodb.UpdateItem", lease_first)
    report = sweeper.sweep(app)
    assert leased and (report.moved, report.skipped) == (1, 0)
    current = app.store.get(job.job_id)
    assert current.state is JobState.RUNNING
    assert row(app, job.job_id)["sweep_at"] == current.lease_expires_at
    assert_sweep_invariant(app)
    past_the_lease(app, clock)  # ... and dies
    assert sweeper.sweep(app).recovered == 1
    assert app.store.get(job.job_id).crash_count == 1


@pytest.mark.parametrize("kind", ["lose", "throttle"])
def test_a_lost_response_or_a_throttle_on_the_frontier_still_saves_it(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry, kind: str) -> None:
    submit_swept(app, JobSpec(task="echo"))
    deliver(app)
    past_the_bound(app, clock)
    injector = inject(app, Fault(target="dynamodb.UpdateItem", kind=kind, times=1,
                                 when=is_frontier_save))
    injector.throttle_delay = 0
    assert sweeper.sweep(app).passed == 1
    assert sum(injector.injected.values()) == 1
    assert sweeper.sweep(app).examined == 0


@pytest.mark.parametrize("kind", ["fail", "crash"])
def test_a_pass_killed_or_refused_before_it_saves_the_frontier_loses_nothing(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry, kind: str) -> None:
    # Three due entries: a finished job, a job whose worker died, one still running. The
    # pass settles them and is then killed (or its frontier write refused) before the
    # frontier is saved: the next pass reads them again, and does nothing twice.
    done = submit_swept(app, JobSpec(task="echo")).job
    deliver(app)
    lost = submit_swept(app, JobSpec(task="echo")).job
    running = submit_swept(app, JobSpec(task="echo")).job
    receive_all(app)
    lease(app, lost.job_id)
    lease(app, running.job_id)
    clock.advance(app.settings.lease_seconds - 10)
    beat = app.store.get(running.job_id)
    app.store.update_running(beat, owner="w1", conflict=LookupError, set={
        "lease_expires_at": app.now() + int(app.settings.lease_seconds * 1000)})
    clock.advance(app.settings.skew_grace_seconds + 11)  # past lost's lease only
    injector = inject(app, Fault(target="dynamodb.UpdateItem", kind=kind, times=1,
                                 when=is_frontier_save))
    if kind == "crash":
        with pytest.raises(InjectedCrash):
            sweeper.sweep(app)
        injector.revive()  # the sweeper's process restarted
    else:
        report = sweeper.sweep(app)
        assert (report.passed, report.recovered, report.moved) == (1, 1, 1)
    assert sweep_frontier.load(app) == {}
    recovered = app.store.get(lost.job_id)
    assert (recovered.state, recovered.crash_count) == (JobState.QUEUED, 1)
    again = sweeper.sweep(app)
    # The finished row is passed again; the recovered and the moved rows' entries are ahead
    # now, so nothing is re-driven or moved twice.
    assert (again.examined, again.passed, again.recovered, again.moved) == (1, 1, 0, 0)
    assert app.store.get(lost.job_id).crash_count == 1
    assert app.store.get(done.job_id).state is JobState.SUCCEEDED
    assert sweeper.sweep(app).examined == 0
    assert_sweep_invariant(app)


def test_a_move_failed_past_the_retries_holds_the_frontier_at_its_entry(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    job = submit_swept(app, JobSpec(task="echo")).job
    receive_all(app)
    lease(app, job.job_id)
    clock.advance(app.settings.lease_seconds / 2)
    app.store.update_running(app.store.get(job.job_id), owner="w1", conflict=LookupError,
                             set={"lease_expires_at": app.now() + 60_000})
    clock.advance(app.settings.lease_seconds / 2 + 1)  # past the bound, not the lease
    # What a caller sees once botocore's retries of a throttle ran out.
    inject(app, Fault(target="dynamodb.UpdateItem", kind="fail", times=1, when=is_move))
    report = sweeper.sweep(app)
    assert (report.moved, report.skipped) == (0, 1)
    shard = shard_of(job.job_id, app.settings.shards)
    assert sweep_frontier.load(app).get(shard, 0) <= row(app, job.job_id)["sweep_at"]
    assert_sweep_invariant(app)
    assert sweeper.sweep(app).moved == 1  # the next pass finds it again
    assert_sweep_invariant(app)


@pytest.mark.parametrize("same_time", [True, False])
def test_a_pass_reads_about_its_limit_and_the_next_goes_on_from_there(
        make_app: Callable[..., Leasehold], clock: FakeClock, tasks: TaskRegistry,
        same_time: bool) -> None:
    # One shard: five finished jobs, entered at one instant or a second apart. A pass reads
    # about ``limit_per_shard`` entries and never splits one ``sweep_at`` (else entries that
    # share one could hold the frontier for ever).
    app = make_app(shards=1)
    for _ in range(5):
        submit_swept(app, JobSpec(task="echo"))
        if not same_time:
            clock.advance(1)
    deliver(app)
    past_the_bound(app, clock)
    clock.advance(5)
    examined = [sweeper.sweep(app, limit_per_shard=2).examined for _ in range(4)]
    assert examined == ([5, 0, 0, 0] if same_time else [2, 2, 1, 0])
