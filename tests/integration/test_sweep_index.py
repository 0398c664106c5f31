"""The sweep index: a lower bound that leases and heartbeats never move.

Every QUEUED or RUNNING row carries ``sweep_at``, no later than the time it may need the
sweeper and not below the sweeper's frontier; the sweeper reads the rows it finds, re-drives
the expired ones and moves the bound of the others forward. These tests break that design
where it could break: a lease taken long after the hand-off, heartbeats, a long run, a lost
hand-off, and faults on the move write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import from_av
from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle import control, sweep_frontier, sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.worker import Delivery, Worker
from leasehold.time import ticker

from .helpers import deliver, inject, receive_all, submit_swept

LIVE = (JobState.QUEUED, JobState.RUNNING)


@pytest.fixture
def tasks(registry: TaskRegistry) -> TaskRegistry:
    registry.task("echo")(lambda payload, ctx: payload)
    registry.task("boom")(lambda payload, ctx: 1 / 0)
    return registry


def row(app: Leasehold, job_id: str) -> dict[str, Any]:
    item = app.clients.dynamodb.get_item(TableName=app.settings.jobs_table,
                                         Key=job_key(job_id), ConsistentRead=True)
    return from_av(item["Item"])


def assert_sweep_invariant(app: Leasehold) -> None:
    """Every live row is in the sweep index no later than it may need the sweeper (its
    deadline, or a lease it could get right now), and not below the sweeper's frontier (a
    pass will read it); another row may keep the entry it had (passed without a write)."""
    frontier = sweep_frontier.load(app)
    now = app.now()
    next_lease = now + int((app.settings.lease_seconds - app.settings.skew_grace_seconds) * 1000)
    items = app.clients.dynamodb.scan(TableName=app.settings.jobs_table)["Items"]
    assert items
    for raw in items:
        item = from_av(raw)
        if JobState(item["state"]) in LIVE:
            assert "sweep_shard" in item, item["job_id"]
            assert item["sweep_at"] <= item["lease_expires_at"], item
            if item["state"] == JobState.QUEUED.value:
                assert item["sweep_at"] <= next_lease, item
            assert item["sweep_at"] >= frontier.get(item["sweep_shard"], 0), item


def lease(app: Leasehold, job_id: str, owner: str = "w1") -> int:
    """Lease the job as a worker does (the settings' lease length); returns its epoch."""
    job = app.store.get(job_id)
    now = app.now()
    leased = app.store.lease(job_id, job.epoch, owner=owner, now=now, actor=owner,
                             expires_at=now + int(app.settings.lease_seconds * 1000))
    return leased.epoch


def past_the_lease(app: Leasehold, clock: FakeClock) -> None:
    clock.advance(app.settings.lease_seconds + app.settings.skew_grace_seconds + 1)


@pytest.mark.parametrize("sweeps_while_queued", [False, True])
def test_a_job_leased_long_after_it_was_queued_is_recovered_within_its_lease(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry, sweeps_while_queued: bool
) -> None:
    # A bound taken from the hand-off deadline alone would hide this crash for 15 minutes.
    job = submit_swept(app, JobSpec(task="echo")).job
    receive_all(app)  # the message waits behind a backlog (here: is taken and dropped)
    for _ in range(10):  # 5 minutes in the queue
        clock.advance(30)
        if sweeps_while_queued:
            assert sweeper.sweep(app).redispatched == 0
    epoch = lease(app, job.job_id)  # ... and then the worker dies at once
    past_the_lease(app, clock)
    report = sweeper.sweep(app)
    assert report.recovered == 1
    recovered = app.store.get(job.job_id)
    assert (recovered.state, recovered.epoch, recovered.crash_count) == \
        (JobState.QUEUED, epoch + 1, 1)


def test_a_heartbeat_extended_lease_is_moved_never_swept(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    job = submit_swept(app, JobSpec(task="echo")).job
    epoch = lease(app, job.job_id)
    entered = row(app, job.job_id)["sweep_at"]
    moved = 0
    for _ in range(40):  # twenty minutes of heartbeats every lease/3, the sweeper each time
        clock.advance(app.settings.lease_seconds / 3)
        running = app.store.get(job.job_id)
        app.store.update_running(running, owner="w1", conflict=LookupError, set={
            "lease_expires_at": app.now() + int(app.settings.lease_seconds * 1000)})
        report = sweeper.sweep(app)
        assert report.recovered == report.redispatched == 0
        moved += report.moved
        assert_sweep_invariant(app)
    current = app.store.get(job.job_id)
    assert (current.state, current.epoch, current.crash_count) == (JobState.RUNNING, epoch, 0)
    # The bound moved to the lease (about once per lease), never on a heartbeat.
    item = row(app, job.job_id)
    assert item["sweep_at"] > entered
    assert 10 <= moved <= 40
    # And when the heartbeats stop, the sweeper finds the lease within its length.
    past_the_lease(app, clock)
    assert sweeper.sweep(app).recovered == 1


@pytest.mark.ddblocal
def test_a_lease_and_a_heartbeat_leave_the_index_alone(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    job = submit_swept(app, JobSpec(task="echo")).job
    entered = row(app, job.job_id)
    assert entered["sweep_at"] == job.created_at + int(
        (app.settings.lease_seconds - app.settings.skew_grace_seconds) * 1000)
    lease(app, job.job_id)
    clock.advance(5)
    app.store.update_running(app.store.get(job.job_id), owner="w1", conflict=LookupError,
                             set={"lease_expires_at": app.now() + 30_000})
    after = row(app, job.job_id)
    assert (after["sweep_shard"], after["sweep_at"]) == \
        (entered["sweep_shard"], entered["sweep_at"])


def test_a_lost_hand_off_is_found_at_its_deadline_and_not_before(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    inject(app, Fault(target="sqs.SendMessageBatch", kind="fail", times=1))
    job = submit_swept(app, JobSpec(task="echo")).job
    assert receive_all(app) == []  # the hand-off was lost
    deadline = app.store.get(job.job_id).lease_expires_at
    assert deadline is not None
    while app.now() < deadline + app.settings.skew_grace_seconds * 1000:
        report = sweeper.sweep(app)  # moved along while the deadline is ahead
        assert report.redispatched == report.waiting == 0
        assert_sweep_invariant(app)
        clock.advance(40)
    assert sweeper.sweep(app).redispatched == 1
    assert deliver(app) == 1
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED


def is_move(params: Mapping[str, Any]) -> bool:
    return params.get("UpdateExpression") == "SET sweep_at = :to"


@pytest.mark.ddblocal
@pytest.mark.parametrize("kind", ["lose", "throttle"])
def test_a_lost_response_or_a_throttle_on_the_move_still_moves_it(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry, kind: str) -> None:
    job = submit_swept(app, JobSpec(task="echo")).job
    lease(app, job.job_id)
    clock.advance(app.settings.lease_seconds / 2)
    app.store.update_running(app.store.get(job.job_id), owner="w1", conflict=LookupError,
                             set={"lease_expires_at": app.now() + 30_000})
    clock.advance(app.settings.lease_seconds / 2 + 1)  # past the bound, not the lease
    injector = inject(app, Fault(target="dynamodb.UpdateItem", kind=kind, times=1,
                                 when=is_move))
    report = sweeper.sweep(app)
    assert sum(injector.injected.values()) == 1
    assert (report.moved, report.recovered, report.skipped) == (1, 0, 0)
    current = app.store.get(job.job_id)
    assert row(app, job.job_id)["sweep_at"] == current.lease_expires_at
    assert current.state is JobState.RUNNING


@pytest.mark.ddblocal
def test_a_move_refused_because_the_job_finished_passes_its_entry(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    # The worker finishes between the sweeper's read and its move: the move is refused, the
    # row read again is finished, and its entry passed (never read again).
    job = submit_swept(app, JobSpec(task="echo")).job
    clock.advance(app.settings.lease_seconds + 1)  # queued past its bound, not its deadline
    [message] = receive_all(app)
    finished: list[bool] = []

    def finish_first(**kwargs: Any) -> None:
        if not finished and is_move(kwargs.get("params", {})):
            finished.append(True)
            Worker(app).process(Delivery(message.body))

    app.clients.dynamodb.meta.events.register_first(
        "provide-client-params.dynamodb.UpdateItem", finish_first)
    report = sweeper.sweep(app)
    assert finished and (report.moved, report.skipped, report.passed) == (0, 0, 1)
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    assert_sweep_invariant(app)
    assert sweeper.sweep(app).examined == 0


@pytest.mark.ddblocal
def test_every_writer_keeps_the_invariant(
        make_app: Any, clock: FakeClock, registry: TaskRegistry) -> None:
    app = make_app(lease_seconds=30.0)

    @registry.task("flaky")
    def flaky(payload: Any, ctx: JobContext) -> Any:
        raise RuntimeError("again")

    registry.task("echo")(lambda payload, ctx: payload)
    # retry -> QUEUED (short backoff) and -> SCHEDULED (long backoff), then manual retry,
    # cancel, the ticker promoting a delayed job, and a job handed off ahead of time.
    short = submit_swept(app, JobSpec(task="flaky", max_attempts=2)).job
    delayed = submit_swept(app, JobSpec(task="echo", delay_seconds=1200)).job
    ahead = submit_swept(app, JobSpec(task="echo", delay_seconds=600)).job
    doomed = submit_swept(app, JobSpec(task="echo")).job
    assert_sweep_invariant(app)
    control.cancel(app, doomed.job_id)
    deliver(app, once=True)
    assert_sweep_invariant(app)
    for _ in range(12):
        clock.advance(200)
        ticker.promote_due(app)
        sweeper.sweep(app)
        assert_sweep_invariant(app)
        deliver(app)
        assert_sweep_invariant(app)
    assert app.store.get(short.job_id).state is JobState.DEAD
    control.retry(app, short.job_id)
    assert_sweep_invariant(app)
    assert {app.store.get(j.job_id).state for j in (delayed, ahead)} == {JobState.SUCCEEDED}


def test_a_job_requeued_past_its_deadline_stays_where_the_sweeper_reads(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    """A job that enters QUEUED after its ``deadline_seconds`` passed (here the sweeper's own
    recovery of a lost worker, whose re-send is lost too) must carry a ``sweep_at`` the
    sweeper will still read: the hand-off deadline is clamped by the job's deadline, and a
    deadline already past must not put the entry below the frontier, where no pass would
    find the job again. Found by the state machine: a woken parent entered QUEUED past its
    deadline with ``sweep_at`` = its deadline, below the frontier."""
    job = submit_swept(app, JobSpec(task="echo", deadline_seconds=10)).job
    receive_all(app)  # the hand-off; the worker that leases it is lost
    lease(app, job.job_id)
    clock.advance(5)
    sweeper.sweep(app)  # the frontier moves on while the job runs
    past_the_lease(app, clock)  # past the lease, and past the job's deadline
    inject(app, Fault(target="sqs.SendMessage", kind="fail", times=1))
    report = sweeper.sweep(app)
    assert report.recovered == 1  # re-queued, its message lost
    assert app.store.get(job.job_id).state is JobState.QUEUED
    assert receive_all(app) == []
    assert_sweep_invariant(app)
    for _ in range(3):
        clock.advance(app.settings.skew_grace_seconds + 1)
        sweeper.sweep(app)
    ended = app.store.get(job.job_id)
    assert ended.state is JobState.DEAD and ended.error is not None
    assert ended.error.type == "DeadlineExceeded"
