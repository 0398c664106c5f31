"""The durable lifecycle, driven through moto with a fake clock (issue 2's list, in order)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from botocore.exceptions import ClientError

from leasehold.clock import FakeClock
from leasehold.compose import compose
from leasehold.core.context import JobContext
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import NonRetryableError
from leasehold.lifecycle import sweeper, tracebacks
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Delivery, Outcome, Worker

from .helpers import deliver, dlq_bodies, receive_all, submit_swept

#: How long a test waits for a handler it knows is about to end (a hang would fail it).
HANDLER_GUARD_SECONDS = 300

FAST_RETRY = RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0.4)


@pytest.fixture
def calls() -> list[tuple[str, int]]:
    return []


@pytest.fixture
def tasks(registry: TaskRegistry, calls: list[tuple[str, int]]) -> TaskRegistry:
    @registry.task("echo")
    def echo(payload: Any, ctx: JobContext) -> Any:
        calls.append((ctx.job_id, ctx.attempt))
        return {"echo": payload}

    @registry.task("flaky", retry=FAST_RETRY)
    def flaky(payload: Any, ctx: JobContext) -> Any:
        calls.append((ctx.job_id, ctx.attempt))
        if ctx.attempt <= payload["failures"]:
            raise ConnectionError(f"transient failure {ctx.attempt}")
        return "ok"

    @registry.task("fail", retry=FAST_RETRY, max_attempts=3)
    def fail(payload: Any, ctx: JobContext) -> Any:
        calls.append((ctx.job_id, ctx.attempt))
        raise RuntimeError("always broken")

    return registry


@pytest.mark.ddblocal
def test_a_submitted_job_runs_once_and_ends_succeeded_with_its_result(
    app: Leasehold, tasks: TaskRegistry, calls: list
) -> None:
    job = submit(app, JobSpec(task="echo", payload={"x": 1})).job
    assert job.state is JobState.QUEUED
    assert deliver(app) == 1
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED
    assert done.result == {"echo": {"x": 1}}
    assert calls == [(job.job_id, 1)]
    assert [t.target for t in done.history] == ["QUEUED", "RUNNING", "SUCCEEDED"]
    assert receive_all(app) == []  # the message was deleted after the write


@pytest.mark.ddblocal
def test_the_same_message_delivered_twice_runs_the_handler_once(
    app: Leasehold, tasks: TaskRegistry, calls: list
) -> None:
    job = submit(app, JobSpec(task="echo", payload=1)).job
    [message] = receive_all(app)
    worker = Worker(app)
    first = worker.process(Delivery(message.body, message.queue_url, message.receipt_handle))
    second = worker.process(Delivery(message.body, message.queue_url, message.receipt_handle))
    assert (first, second) == (Outcome.SUCCEEDED, Outcome.STALE)
    assert calls == [(job.job_id, 1)]
    assert app.store.get(job.job_id).attempt == 1


@pytest.mark.ddblocal
def test_a_zombie_worker_can_neither_heartbeat_nor_finish_and_the_new_owners_result_stands(
    app: Leasehold, registry: TaskRegistry, clock: FakeClock
) -> None:
    """The zombie is a worker stalled past its lease that does not know it: its own clock
    (a second app on the same tables) never moves, so its heartbeats go to DynamoDB and are
    refused there by the lease's fence, not by its clock.

    Its worker loop also heartbeats on its own, every third of the lease in real time, and
    gives up on a handler whose lease it finds lost; the handler runs on, abandoned. Under
    load the take-over below (a sweep and the new owner's whole run) outlasted that third
    (10 s), the loop gave up first and ``process`` returned while the handler was still
    running: the test read what the handler had not written yet (issue 44). Either way the
    zombie's heartbeat is refused and its result never recorded; the test waits for the
    handler to end before it looks."""
    seen: dict[str, Any] = {}
    handler_done = threading.Event()
    zombie_app = compose(app.settings, clock=FakeClock(clock.now_ms()), registry=registry,
                         clients=app.clients)

    @registry.task("slow")
    def slow(payload: Any, ctx: JobContext) -> Any:
        if ctx.attempt > 1:
            return "new owner's result"
        try:
            # While the first worker is stalled its lease expires; the sweeper re-drives and
            # a second worker runs the job to the end. Then the first one wakes up.
            clock.advance(app.settings.lease_seconds + app.settings.skew_grace_seconds + 1)
            assert sweeper.sweep(app).recovered == 1
            assert deliver(app, Worker(app, worker_id="second")) == 1
            ctx.heartbeat({"still": "here"})
            seen["zombie_cancelled"] = ctx.cancelled
            seen["reason"] = ctx.cancel_reason
            return "zombie result"
        except BaseException as exc:
            seen["failed"] = repr(exc)  # shown by the comparison below
            raise
        finally:
            handler_done.set()

    job = submit_swept(app, JobSpec(task="slow")).job
    [message] = receive_all(app)
    outcome = Worker(zombie_app, worker_id="first").process(Delivery(message.body))
    assert outcome is Outcome.LEASE_LOST
    # A guard against a hang, not a timing: the handler ends as soon as its steps have run.
    assert handler_done.wait(HANDLER_GUARD_SECONDS)
    assert seen == {"zombie_cancelled": True, "reason": "lease lost"}
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED
    assert done.result == "new owner's result"
    assert done.progress_json is None  # the zombie's heartbeat wrote nothing
    assert [c.actor for c in done.history].count("second") >= 1


@pytest.mark.ddblocal
def test_a_worker_that_dies_after_leasing_is_recovered_by_the_sweeper(
    app: Leasehold, tasks: TaskRegistry, clock: FakeClock, calls: list
) -> None:
    job = submit_swept(app, JobSpec(task="echo", payload="p")).job
    [message] = receive_all(app)
    body = json.loads(message.body)
    # A worker leases the job and dies without a word.
    app.store.lease(job.job_id, body["epoch"], owner="dead:1", now=app.now(),
                    expires_at=app.now() + 30_000, actor="dead")
    assert sweeper.sweep(app).recovered == 0  # not expired yet
    clock.advance(30 + app.settings.skew_grace_seconds + 1)
    report = sweeper.sweep(app)
    assert (report.recovered, report.dead) == (1, 0)
    assert deliver(app) == 1
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED
    assert (done.attempt, done.crash_count, done.epoch) == (2, 1, 2)
    assert calls == [(job.job_id, 2)]


def test_a_row_written_whose_send_failed_is_dispatched_by_the_sweeper_and_runs_once(
    app: Leasehold, tasks: TaskRegistry, clock: FakeClock, calls: list,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_send(*args: Any, **kwargs: Any) -> None:
        raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "down"}},
                          "SendMessage")

    with monkeypatch.context() as patch:
        patch.setattr(app.queues, "send", broken_send)
        job = submit(app, JobSpec(task="echo", payload=2)).job
    assert app.store.get(job.job_id).state is JobState.QUEUED
    assert receive_all(app) == []
    assert sweeper.sweep(app).redispatched == 0  # the hand-off is not overdue yet
    clock.advance(app.settings.handoff_seconds + app.settings.skew_grace_seconds + 1)
    assert sweeper.sweep(app).redispatched == 1
    assert deliver(app) == 1
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    assert calls == [(job.job_id, 1)]


def test_transient_failures_retry_with_growing_jittered_bounded_delays_then_succeed_once(
    app: Leasehold, tasks: TaskRegistry, calls: list
) -> None:
    job = submit(app, JobSpec(task="flaky", payload={"failures": 3}, max_attempts=5)).job
    for attempt in range(1, 4):
        assert deliver(app, once=True) == 1
        retried = app.store.get(job.job_id)
        assert (retried.state, retried.attempt) == (JobState.QUEUED, attempt)
        assert retried.error is not None and retried.error.type == "ConnectionError"
        assert retried.error.message == f"transient failure {attempt}"
        assert app.now() <= retried.run_at <= app.now() + 400
    assert deliver(app, once=True) == 1
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED and done.attempt == 4
    assert [a for _, a in calls] == [1, 2, 3, 4]
    assert sum(1 for t in done.history if t.target == "SUCCEEDED") == 1


def test_a_job_that_succeeds_after_retries_keeps_its_earlier_attempts_errors(
    app: Leasehold, tasks: TaskRegistry
) -> None:
    job = submit(app, JobSpec(task="flaky", payload={"failures": 7}, max_attempts=9)).job
    for _ in range(8):
        deliver(app, once=True)
    done = app.store.get(job.job_id)
    assert (done.state, done.error) == (JobState.SUCCEEDED, None)
    # The newest five failed attempts, oldest first, as the API shows them.
    assert done.view()["attempt_errors"] == [
        {"attempt": n, "type": "ConnectionError", "message": f"transient failure {n}"}
        for n in range(3, 8)]


def test_retry_delays_double_within_bounds(make_app: Any, registry: TaskRegistry,
                                           calls: list) -> None:
    app = make_app()
    policy = RetryPolicy(min_backoff_seconds=10, max_backoff_seconds=35)

    @registry.task("down", retry=policy, max_attempts=6)
    def down(payload: Any, ctx: JobContext) -> Any:
        raise TimeoutError("upstream down")

    job = submit(app, JobSpec(task="down")).job
    worker = Worker(app)
    delays = []
    for attempt in range(1, 5):
        current = app.store.get(job.job_id)
        # Deliver the exact hand-off message (the real one is delayed in SQS by whole seconds).
        body = json.dumps({"job_id": job.job_id, "epoch": current.epoch})
        assert worker.process(Delivery(body)) is Outcome.RETRYING
        after = app.store.get(job.job_id)
        delays.append((after.run_at - app.now()) / 1000)
        assert after.attempt == attempt
    caps = [10, 20, 35, 35]
    assert all(10 <= d <= cap for d, cap in zip(delays, caps, strict=True))
    assert len(set(delays)) == 4


@pytest.mark.ddblocal
def test_a_poison_pill_goes_dead_after_max_attempts_with_its_last_error_and_a_dlq_copy(
    app: Leasehold, tasks: TaskRegistry, calls: list
) -> None:
    job = submit(app, JobSpec(task="fail")).job
    for _ in range(3):
        assert deliver(app, once=True) == 1
    dead = app.store.get(job.job_id)
    assert dead.state is JobState.DEAD
    assert dead.attempt == 3
    assert dead.error is not None
    assert (dead.error.type, dead.error.message) == ("RuntimeError", "always broken")
    # The row keeps an excerpt; the traceback is kept in its own item, which the view reads.
    assert dead.error.traceback == ""
    kept = tracebacks.full_error(app, dead)
    assert kept is not None and "always broken" in kept.traceback
    assert dead.history[-1].reason == "attempts exhausted (3/3)"
    assert [json.loads(b)["job_id"] for b in dlq_bodies(app)] == [job.job_id]
    assert deliver(app) == 0


def test_a_job_that_keeps_killing_its_worker_goes_dead_as_a_poison_pill(
    app: Leasehold, tasks: TaskRegistry, clock: FakeClock
) -> None:
    # With its sweep entry (a row put first): the sweeper's own recoveries (a plain
    # submission's, through its message: test_send_first.py).
    job = submit_swept(app, JobSpec(task="echo", max_attempts=10)).job
    for _ in range(app.settings.max_crash_recoveries):
        current = app.store.get(job.job_id)
        # Leases as long as the settings say (the sweep index's bound assumes no shorter).
        app.store.lease(job.job_id, current.epoch, owner="doomed", now=app.now(),
                        expires_at=app.now() + int(app.settings.lease_seconds * 1000),
                        actor="doomed")
        clock.advance(app.settings.lease_seconds + app.settings.skew_grace_seconds + 1)
        sweeper.sweep(app)
    dead = app.store.get(job.job_id)
    assert dead.state is JobState.DEAD
    assert dead.crash_count == app.settings.max_crash_recoveries
    assert "poison pill" in dead.history[-1].reason
    assert job.job_id in dlq_bodies(app)[0]


def test_a_non_retryable_error_is_dead_at_once(app: Leasehold, registry: TaskRegistry) -> None:
    @registry.task("refuse", retry=RetryPolicy(non_retryable=("LookupError",)))
    def refuse(payload: Any, ctx: JobContext) -> Any:
        if payload == "lookup":
            raise KeyError("missing")  # a subclass of a listed type counts
        raise NonRetryableError("bad input")

    for payload in ("lookup", "explicit"):
        job = submit(app, JobSpec(task="refuse", payload=payload, max_attempts=5)).job
        assert deliver(app) == 1
        dead = app.store.get(job.job_id)
        assert (dead.state, dead.attempt) == (JobState.DEAD, 1)
        assert "non-retryable" in dead.history[-1].reason


def test_an_attempt_past_its_timeout_fails_as_a_timeout_and_is_retried(
    app: Leasehold, registry: TaskRegistry
) -> None:
    @registry.task("hang", retry=FAST_RETRY)
    def hang(payload: Any, ctx: JobContext) -> Any:
        if ctx.attempt == 1:
            ctx.wait_cancelled(10)  # wakes when the worker gives up on the attempt
            return "too late"
        return "in time"

    job = submit(app, JobSpec(task="hang", timeout_seconds=1)).job
    assert deliver(app, once=True) == 1
    retried = app.store.get(job.job_id)
    assert retried.state is JobState.QUEUED
    assert retried.error is not None and retried.error.type == "AttemptTimeout"
    assert deliver(app) == 1
    done = app.store.get(job.job_id)
    assert (done.state, done.result, done.attempt) == (JobState.SUCCEEDED, "in time", 2)


def test_a_message_that_arrives_before_its_job_is_due_waits_and_starts_on_time(
    app: Leasehold, tasks: TaskRegistry, clock: FakeClock, calls: list
) -> None:
    # 0.6 s is below SQS's one-second delay granularity: the message is visible at once.
    job = submit(app, JobSpec(task="echo", payload="soon", delay_seconds=0.6)).job
    [message] = receive_all(app)
    before = clock.now_ms()
    # Sent before its row was put (issue 46): it says when, for a worker that finds no row.
    assert json.loads(message.body) == {"job_id": job.job_id, "epoch": 1, "run_at": job.run_at,
                                        "timeout": job.timeout_seconds, "sent": before}
    assert Worker(app).process(Delivery(message.body)) is Outcome.SUCCEEDED
    done = app.store.get(job.job_id)
    assert done.started_at == job.run_at == before + 600  # waited on the clock, not early

