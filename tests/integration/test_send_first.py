"""Send first, and no sweep entry per job (issue 46; docs/design.md, "The job row is the
source of truth and the outbox").

A plain submission sends its message before it puts its row, and the row carries no
``sweep`` entry: the message is the job's only pointer, and SQS's visibility timeout is its
sweeper while it runs. Each fault that could strand or double such a job is injected at the
botocore layer against a real moto server: a lost send, a lost put, a process killed between
the two, a message delivered before its row, a put slower than the worker's grace, a lease
that runs out while its message is invisible, a message that comes back while the lease
still runs, and a worker that keeps dying (the poison pill through SQS).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from botocore.exceptions import ClientError

from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.aws.queues import Received
from leasehold.clock import FakeClock
from leasehold.core.spec import JobSpec, resolve
from leasehold.core.states import JobState
from leasehold.lifecycle import control, handoff, pausing, sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.leasing import HandedBack
from leasehold.lifecycle.submission import new_job, submit
from leasehold.lifecycle.worker import Delivery, Worker

from . import liveness
from .helpers import deliver, dlq_bodies, inject, receive_all
from .test_sweep_frontier import index_write_units
from .test_sweep_index import row

pytestmark = pytest.mark.ddblocal

GRACE_S = handoff.ORPHAN_GRACE_MS / 1000


def queued(app: Leasehold) -> list[Received]:
    """The messages waiting now (received, then made visible again at once)."""
    messages = receive_all(app)
    for message in messages:
        app.queues.extend(message.queue_url, message.receipt_handle, 0)
    return messages


def handle_one(app: Leasehold) -> str:
    """Receive the one message due and run it through a worker as Lambda's event source
    would: its outcome, or "kept" when the worker handed it back (not acknowledged); a
    kept message is made visible again at once, as its short hand-back ends."""
    [message] = app.queues.receive(app.queues.url("default", "normal"))
    try:
        outcome = Worker(app).process(
            Delivery(message.body, message.queue_url, message.receipt_handle))
    except HandedBack:
        app.queues.extend(message.queue_url, message.receipt_handle, 0)
        return "kept"
    app.queues.delete(message.queue_url, [message.receipt_handle])
    return outcome.value


def in_sweep_index(app: Leasehold, job_id: str) -> bool:
    return "sweep_at" in row(app, job_id)


def test_a_plain_job_writes_no_sweep_entry_and_runs_once(
        app: Leasehold, runs: Counter[str], backend: str) -> None:
    with index_write_units(app, "sweep") as units:
        job = submit(app, JobSpec(task="echo")).job
        assert not in_sweep_index(app, job.job_id)
        assert deliver(app) == 1
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    assert runs[job.job_id] == 1
    if backend == "ddblocal":  # DynamoDB itself: the sweep index costs the job nothing
        assert sum(units) == 0.0, units
    assert queued(app) == []


def test_a_lost_send_puts_the_row_with_its_sweep_entry_and_the_sweeper_sends_it(
        app: Leasehold, clock: FakeClock, runs: Counter[str]) -> None:
    # SQS refuses the send past botocore's retries, before the put and again after it.
    inject(app, Fault(target="sqs.SendMessage", kind="fail", times=2))
    job = submit(app, JobSpec(task="echo")).job
    assert queued(app) == []  # nothing names the row but itself
    assert in_sweep_index(app, job.job_id)  # ... so the row is the outbox
    clock.advance(app.settings.handoff_seconds + app.settings.skew_grace_seconds + 1)
    assert sweeper.sweep(app).redispatched == 1
    assert deliver(app) == 1
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    assert runs[job.job_id] == 1


@pytest.mark.parametrize("kind", ["fail", "crash"])
def test_a_message_whose_put_failed_or_whose_process_died_is_kept_then_dropped(
        app: Leasehold, clock: FakeClock, runs: Counter[str], kind: str) -> None:
    # "fail": the put is refused past botocore's retries (nothing written, the caller sees
    # an error); "crash": the process dies between the send and the put.
    injector = inject(app, Fault(target="dynamodb.PutItem", kind=kind, times=1))
    with pytest.raises((InjectedCrash, ClientError)):
        submit(app, JobSpec(task="echo"))
    injector.revive()
    injector.faults.clear()
    [orphan] = queued(app)
    orphan_id = json.loads(orphan.body)["job_id"]
    # Within the grace its row may still be on its way: kept, not acknowledged.
    assert handle_one(app) == "kept"
    assert left_in_queue(app) == 1
    clock.advance(GRACE_S)
    assert handle_one(app) == "stale"  # past the grace: its row's absence is certain
    assert left_in_queue(app) == 0
    # The client submits again: one job, run once; the first left nothing behind.
    job = submit(app, JobSpec(task="echo")).job
    assert deliver(app) == 1
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    assert runs == Counter({job.job_id: 1})
    assert liveness.rows(app) == [row(app, job.job_id)] and orphan_id != job.job_id


def left_in_queue(app: Leasehold) -> int:
    """How many messages the queue still holds: visible, delayed or in flight."""
    attributes = app.clients.sqs.get_queue_attributes(
        QueueUrl=app.queues.url("default", "normal"),
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                        "ApproximateNumberOfMessagesDelayed"])["Attributes"]
    return sum(int(value) for value in attributes.values())


def test_a_message_delivered_before_its_row_waits_for_it_and_runs_it_once(
        app: Leasehold, runs: Counter[str]) -> None:
    now = app.now()
    spec = resolve(JobSpec(task="echo"), app.registry, pools=app.settings.pools,
                   timeout_limits=app.settings.job_timeout_limits(), now_ms=now)
    row_to_be = new_job(app, spec, now)
    assert handoff.send(app.queues, row_to_be, now, first=True)
    assert handle_one(app) == "kept"  # the worker meets it before the put lands
    app.store.create(row_to_be, swept=False)  # the put lands
    assert handle_one(app) == "succeeded"
    assert app.store.get(row_to_be.job_id).state is JobState.SUCCEEDED
    assert runs[row_to_be.job_id] == 1
    assert left_in_queue(app) == 0


def test_a_put_slower_than_the_grace_sends_again(
        app: Leasehold, clock: FakeClock, runs: Counter[str]) -> None:
    # The put takes longer than RESEND_AFTER_MS (its hook moves the clock as a slow network
    # would): a worker may have met the first message before the row and dropped it.
    def slow(_: Any) -> bool:
        clock.advance(GRACE_S + 1)
        return True

    inject(app, Fault(target="dynamodb.PutItem", kind="throttle", times=1, when=slow))
    job = submit(app, JobSpec(task="echo")).job
    first, second = receive_all(app)
    assert {json.loads(m.body)["job_id"] for m in (first, second)} == {job.job_id}
    # The first was dropped by a worker that met it before the row, past its grace.
    app.queues.delete(first.queue_url, [first.receipt_handle])
    app.queues.extend(second.queue_url, second.receipt_handle, 0)
    assert deliver(app) == 1  # the second runs it
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    assert runs[job.job_id] == 1


def _lease_and_die(app: Leasehold) -> tuple[Received, str]:
    """A worker receives the job's message, leases it, and dies before it finishes: the
    message stays in flight (invisible) and the row RUNNING."""
    [message] = receive_all(app)
    taken = Worker(app).take(Delivery(message.body, message.queue_url, message.receipt_handle))
    assert isinstance(taken, tuple)
    return message, taken[0].job_id


def test_a_lease_that_runs_out_while_its_message_is_invisible_is_recovered_by_sqs(
        app: Leasehold, clock: FakeClock, runs: Counter[str]) -> None:
    job = submit(app, JobSpec(task="echo")).job
    message, _ = _lease_and_die(app)
    clock.advance(app.settings.lease_seconds + app.settings.skew_grace_seconds + 1)
    # The lease ran out, the message is still invisible, and no sweep entry names the row:
    # the sweeper has nothing to do, and nothing runs it yet.
    assert sweeper.sweep(app).examined == 0
    assert deliver(app) == 0
    assert app.store.get(job.job_id).state is JobState.RUNNING
    # Its visibility timeout ends: the next worker re-drives it as the sweeper would.
    app.queues.extend(message.queue_url, message.receipt_handle, 0)
    assert deliver(app) == 2  # the old message (re-drive, acknowledged), then the new one
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED
    assert (done.attempt, done.crash_count, runs[job.job_id]) == (2, 1, 1)
    assert left_in_queue(app) == 0


def test_a_message_back_while_its_lease_runs_is_kept_until_the_lease_ends(
        app: Leasehold, clock: FakeClock, runs: Counter[str]) -> None:
    job = submit(app, JobSpec(task="echo")).job
    message, _ = _lease_and_die(app)
    # The worker could not extend the visibility (or it is slow): the message shows while
    # the lease still runs. It is not the job's end: kept, nothing re-driven, nothing run.
    app.queues.extend(message.queue_url, message.receipt_handle, 0)
    assert handle_one(app) == "kept"
    assert app.store.get(job.job_id).state is JobState.RUNNING
    assert left_in_queue(app) == 1
    assert runs[job.job_id] == 0


def test_a_cancel_requested_on_a_lost_worker_ends_cancelled_when_its_message_comes_back(
        app: Leasehold, clock: FakeClock, runs: Counter[str]) -> None:
    job = submit(app, JobSpec(task="echo")).job
    message, _ = _lease_and_die(app)
    control.cancel(app, job.job_id)  # flagged: the dead worker's heartbeat never sees it
    clock.advance(app.settings.lease_seconds + app.settings.skew_grace_seconds + 1)
    app.queues.extend(message.queue_url, message.receipt_handle, 0)
    assert handle_one(app) == "stale"  # the worker that meets it ends it, as the sweeper would
    assert app.store.get(job.job_id).state is JobState.CANCELLED
    assert left_in_queue(app) == 0 and runs[job.job_id] == 0


def test_a_paused_plain_job_gets_a_sweep_entry_so_a_lost_resume_is_re_sent(
        app: Leasehold, clock: FakeClock, runs: Counter[str]) -> None:
    job = submit(app, JobSpec(task="echo")).job
    assert not in_sweep_index(app, job.job_id)
    pausing.pause(app, job.job_id)
    assert in_sweep_index(app, job.job_id)  # its message meets the hold and is done with
    assert handle_one(app) == "stale"
    # The resume lifts the hold and its process dies before its send.
    injector = inject(app, Fault(target="sqs.SendMessage", kind="crash", times=1))
    with pytest.raises(InjectedCrash):
        pausing.resume(app, job.job_id)
    injector.revive()
    injector.faults.clear()
    clock.advance(app.settings.handoff_seconds + app.settings.skew_grace_seconds + 1)
    assert sweeper.sweep(app).redispatched == 1  # the entry the pause wrote finds it
    assert deliver(app) == 1
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    assert runs[job.job_id] == 1


def test_a_job_that_keeps_killing_its_worker_goes_dead_through_its_messages(
        app: Leasehold, clock: FakeClock, runs: Counter[str]) -> None:
    job = submit(app, JobSpec(task="echo", max_attempts=10)).job
    for _ in range(app.settings.max_crash_recoveries):
        message, _ = _lease_and_die(app)
        clock.advance(app.settings.lease_seconds + app.settings.skew_grace_seconds + 1)
        app.queues.extend(message.queue_url, message.receipt_handle, 0)
        # The next worker re-drives it (a new message), or buries it the last time.
        consume(Worker(app), receive_all(app))
    dead = app.store.get(job.job_id)
    assert dead.state is JobState.DEAD
    assert dead.crash_count == app.settings.max_crash_recoveries
    assert "poison pill" in dead.history[-1].reason
    assert job.job_id in dlq_bodies(app)[0]
    assert runs[job.job_id] == 0


def test_a_keyed_submission_puts_first_with_its_sweep_entry(
        app: Leasehold, runs: Counter[str]) -> None:
    # A keyed replay sends only for a row it finds queued and never leased: it must put
    # first to know (test_replay_handoff.py), so its row keeps the sweep entry.
    job = submit(app, JobSpec(task="echo", idempotency_key="k")).job
    assert in_sweep_index(app, job.job_id)
    assert "sent" not in json.loads(receive_all(app)[0].body)
