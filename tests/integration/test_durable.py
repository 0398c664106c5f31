"""Durable execution (issue 23) through moto, the real worker, ticker and sweeper, with a fake
clock: steps kept across attempts and fenced by the lease, sleeps that free the worker,
callbacks completed or timed out exactly once, children spawned once and awaited."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.core.suspension import CallbackTimeout
from leasehold.durable import callbacks, records
from leasehold.lifecycle import control, sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.time.ticker import promote_due

from .api_client import ApiClient
from .helpers import deliver, inject, receive_all, submit_swept
from .liveness import assert_every_live_job_can_wake, messages_in_queues

FAST = RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0)


@pytest.fixture
def ran() -> list[str]:
    return []


@pytest.fixture
def tokens() -> list[str]:
    return []


@pytest.fixture
def tasks(registry: TaskRegistry, ran: list[str], tokens: list[str]) -> TaskRegistry:
    @registry.task("two_steps", retry=FAST)
    def two_steps(payload: Any, ctx: JobContext) -> Any:
        first = ctx.step("charge", lambda: ran.append("charge") or {"charged": 42})
        if ctx.attempt == 1 and payload.get("fail_once"):
            raise ConnectionError("after step one")
        second = ctx.step("ship", lambda: ran.append("ship") or "shipped")
        return [first, second]

    @registry.task("same_name_twice", retry=FAST)
    def same_name_twice(payload: Any, ctx: JobContext) -> Any:
        ctx.step("a", lambda: 1)
        return ctx.step("a", lambda: 2)

    @registry.task("napper", retry=FAST)
    def napper(payload: Any, ctx: JobContext) -> Any:
        ran.append("run")
        before = ctx.step("before", lambda: ran.append("before") or 1)
        ctx.sleep(payload["seconds"])
        return before + ctx.step("after", lambda: ran.append("after") or 1)

    @registry.task("swallower", retry=FAST)
    def swallower(payload: Any, ctx: JobContext) -> Any:
        try:
            ctx.sleep(3600)
        except Exception:
            return "swallowed"
        return "woke"

    @registry.task("approval", retry=FAST)
    def approval(payload: Any, ctx: JobContext) -> Any:
        cb = ctx.callback("approve", timeout_seconds=(payload or {}).get("timeout", 3600))
        tokens.append(cb.token)
        ran.append("run")
        try:
            return {"approved": cb.wait()}
        except CallbackTimeout:
            return "timed out"

    @registry.task("child", retry=FAST)
    def child(payload: Any, ctx: JobContext) -> Any:
        return payload * 10

    @registry.task("parent", retry=FAST)
    def parent(payload: Any, ctx: JobContext) -> Any:
        ran.append("parent")
        ids = [ctx.spawn("child", i) for i in range(payload)]
        return [r["result"] for r in ctx.wait_for(ids)]

    return registry


def stored(app: Leasehold, job_id: str) -> dict[str, dict[str, Any]]:
    return records.load(app, job_id)


# -- steps ------------------------------------------------------------------------------

def test_a_job_failing_after_step_one_resumes_without_running_step_one_again_and_names_are_unique(
    app: Leasehold, tasks: TaskRegistry, ran: list[str]
) -> None:
    job = submit(app, JobSpec(task="two_steps", payload={"fail_once": True})).job
    deliver(app, once=True)
    assert app.store.get(job.job_id).state is JobState.QUEUED  # retried
    deliver(app)
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED
    assert done.result == [{"charged": 42}, "shipped"]
    assert ran == ["charge", "ship"]
    assert sorted(stored(app, job.job_id)) == ["step#charge", "step#ship"]
    # A name used twice in one execution fails the job at once: every attempt would.
    job = submit(app, JobSpec(task="same_name_twice")).job
    deliver(app)
    dead = app.store.get(job.job_id)
    assert dead.state is JobState.DEAD and dead.attempt == 1
    assert dead.error is not None and "used twice" in dead.error.message


def test_an_attempt_that_lost_its_lease_stores_no_step(
    app: Leasehold, registry: TaskRegistry, clock: FakeClock, ran: list[str]
) -> None:
    @registry.task("slow_step", retry=FAST)
    def slow_step(payload: Any, ctx: JobContext) -> Any:
        def work() -> str:
            ran.append(f"work {ctx.attempt}")
            if ctx.attempt == 1:  # the lease runs out and the sweeper hands the job over
                clock.advance(app.settings.lease_seconds + app.settings.skew_grace_seconds + 1)
                sweeper.sweep(app)
            return f"from attempt {ctx.attempt}"
        return ctx.step("work", work)

    job = submit_swept(app, JobSpec(task="slow_step")).job
    deliver(app, once=True)
    assert ran == ["work 1"]
    assert stored(app, job.job_id) == {}  # the zombie's result was refused
    deliver(app)
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED and done.result == "from attempt 2"
    assert stored(app, job.job_id)["step#work"]["result"] == '"from attempt 2"'


def test_a_step_whose_store_was_lost_or_throttled_is_stored_once_and_not_rerun(
    app: Leasehold, tasks: TaskRegistry, ran: list[str]
) -> None:
    injector = inject(app)
    for kind in ("lose", "throttle"):
        ran.clear()
        job = submit(app, JobSpec(task="two_steps", payload={})).job
        # Both steps' stores: each lands and loses its response, or is throttled first.
        injector.faults[:] = [Fault(target="dynamodb.TransactWriteItems", kind=kind, times=2)]
        deliver(app)
        done = app.store.get(job.job_id)
        assert done.state is JobState.SUCCEEDED and done.attempt == 1, kind
        assert ran == ["charge", "ship"], kind
        assert sorted(stored(app, job.job_id)) == ["step#charge", "step#ship"]


# -- sleeps -----------------------------------------------------------------------------

def test_a_short_sleep_frees_the_worker_and_resumes_through_its_delayed_message(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], clock: FakeClock
) -> None:
    job = submit(app, JobSpec(task="napper", payload={"seconds": 0.5})).job
    start = clock.now_ms()
    deliver(app, once=True)
    asleep = app.store.get(job.job_id)
    assert asleep.state is JobState.SLEEPING and asleep.lease_owner is None
    assert asleep.view()["sleeping_until"] is not None and asleep.view()["waiting"] == "sleep"
    assert asleep.run_at == start + 500
    deliver(app)  # the message leases it from SLEEPING at its time (the worker waits it out)
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED and done.result == 2
    assert done.attempt == 1  # a sleep is not an attempt
    assert ran == ["run", "before", "run", "after"]
    assert clock.now_ms() >= start + 500


def test_a_long_sleep_waits_in_the_due_index_and_the_ticker_wakes_it_on_time(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], clock: FakeClock
) -> None:
    job = submit(app, JobSpec(task="napper", payload={"seconds": 7200})).job
    deliver(app)
    assert receive_all(app) == []  # no message: nothing holds a worker or a queue
    clock.advance(7200 - 120)
    assert promote_due(app).promoted == 0  # not before its time (beyond the look-ahead)
    clock.advance(120)
    assert promote_due(app).promoted == 1
    assert app.store.get(job.job_id).state is JobState.QUEUED
    deliver(app)
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    assert ran.count("before") == 1 and ran.count("after") == 1


def test_a_lost_wake_up_message_is_found_by_the_sweeper(
    app: Leasehold, tasks: TaskRegistry, clock: FakeClock
) -> None:
    job = submit(app, JobSpec(task="napper", payload={"seconds": 0.5})).job
    deliver(app, once=True)
    for message in receive_all(app):  # the wake-up message is lost
        app.queues.delete(message.queue_url, [message.receipt_handle])
    clock.advance(app.settings.handoff_seconds + 60)
    assert job.job_id in sweeper.sweep(app).job_ids
    deliver(app)
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED


def test_a_suspension_is_not_swallowed_and_cancel_reaches_the_sleeping_job_at_once(
    app: Leasehold, tasks: TaskRegistry
) -> None:
    swallower = submit(app, JobSpec(task="swallower")).job
    deliver(app)
    assert app.store.get(swallower.job_id).state is JobState.SLEEPING  # not "swallowed"
    job = submit(app, JobSpec(task="napper", payload={"seconds": 0.5})).job
    deliver(app, once=True)
    assert control.cancel(app, job.job_id).state is JobState.CANCELLED
    deliver(app)  # the wake-up message is stale now
    assert app.store.get(job.job_id).state is JobState.CANCELLED


# -- callbacks --------------------------------------------------------------------------

def test_a_callback_completed_wakes_its_job_once_and_a_second_completion_changes_nothing(
    app: Leasehold, tasks: TaskRegistry, tokens: list[str]
) -> None:
    job = submit(app, JobSpec(task="approval")).job
    deliver(app)
    asleep = app.store.get(job.job_id)
    assert asleep.state is JobState.SLEEPING and asleep.extra["waiting"] == "callback:approve"
    api = ApiClient(app)
    path = f"/callbacks/{tokens[0]}"
    assert api.post(path, {"by": "eve"}, tenant="someone-else").status == 404
    job_id, _secret, name = tokens[0].split(":")
    forged = f"/callbacks/{job_id}:{'0' * 32}:{name}"
    assert api.post(forged, {"by": "eve"}, tenant="default").status == 404
    first = api.post(path, {"by": "ann"}, tenant="default")
    second = api.post(path, {"by": "bob"}, tenant="default")
    assert (first.status, first.body["changed"]) == (200, True)
    assert (second.status, second.body["changed"], second.body["outcome"]) == \
        (200, False, "completed")
    assert app.store.get(job.job_id).state is JobState.QUEUED
    deliver(app)
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED and done.result == {"approved": {"by": "ann"}}
    assert len(set(tokens)) == 1  # the token is stable across the replay
    steps = api.get(f"/jobs/{job.job_id}/steps", tenant="default").body["steps"]
    assert [(s["kind"], s["name"], s["outcome"]) for s in steps] == \
        [("callback", "approve", "completed")]
    assert api.get(f"/jobs/{job.job_id}/steps", tenant="someone-else").status == 404


def test_a_completion_that_lands_while_the_job_goes_to_sleep_is_not_missed(
    app: Leasehold, tasks: TaskRegistry, tokens: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_get = records.get

    def get_then_complete(app_: Leasehold, job_id: str, sk: str) -> Any:
        record = real_get(app_, job_id, sk)
        if sk == "cb#approve" and not record.get("outcome"):
            monkeypatch.setattr(records, "get", real_get)
            # The job is RUNNING: only the outcome is written, nothing wakes it.
            assert callbacks.complete(app, tokens[-1], "default", value="early").changed
        return record

    monkeypatch.setattr(records, "get", get_then_complete)
    job = submit(app, JobSpec(task="approval")).job
    deliver(app)
    # Its move to SLEEPING saw the outcome and put it back in the queue instead.
    deliver(app)
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED and done.result == {"approved": "early"}


def test_a_callback_that_times_out_raises_callback_timeout_in_the_handler(
    app: Leasehold, tasks: TaskRegistry, tokens: list[str], clock: FakeClock
) -> None:
    job = submit(app, JobSpec(task="approval")).job
    deliver(app)
    clock.advance(3600)
    promote_due(app)
    deliver(app)
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED and done.result == "timed out"
    late = callbacks.complete(app, tokens[0], "default", value=1)
    assert (late.changed, late.outcome) == (False, "timed_out")


def test_a_completion_racing_the_timeout_gives_one_outcome(
    app: Leasehold, tasks: TaskRegistry, tokens: list[str], clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    job = submit(app, JobSpec(task="approval")).job
    deliver(app)
    clock.advance(3600)
    promote_due(app)
    real_get = records.get

    def get_then_complete(app_: Leasehold, job_id: str, sk: str) -> Any:
        record = real_get(app_, job_id, sk)
        monkeypatch.setattr(records, "get", real_get)
        # Completed after the handler read it and before it writes its timeout: the job
        # is RUNNING, so this writes the outcome alone.
        assert callbacks.complete(app, tokens[0], "default", value="just in time").changed
        return record

    monkeypatch.setattr(records, "get", get_then_complete)
    deliver(app)
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED and done.result == {"approved": "just in time"}
    assert stored(app, job.job_id)["cb#approve"]["outcome"] == "completed"


def test_a_sleeping_job_cancelled_closes_its_callback(
    app: Leasehold, tasks: TaskRegistry, tokens: list[str]
) -> None:
    job = submit(app, JobSpec(task="approval")).job
    deliver(app)
    control.cancel(app, job.job_id)
    assert app.store.get(job.job_id).state is JobState.CANCELLED
    with pytest.raises(Exception, match="closed"):
        callbacks.complete(app, tokens[0], "default", value=1)


# -- children ---------------------------------------------------------------------------

def test_children_are_spawned_once_and_awaited(
    app: Leasehold, tasks: TaskRegistry, ran: list[str]
) -> None:
    job = submit(app, JobSpec(task="parent", payload=5)).job
    for _ in range(10):
        if not deliver(app):
            break
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED
    assert done.result == [0, 10, 20, 30, 40]
    jobs = app.clients.dynamodb.scan(TableName=app.settings.jobs_table)["Count"]
    assert jobs == 6  # the replays spawned no second child
    assert len(ran) >= 2


def test_a_deadline_bounds_the_whole_job_and_cuts_a_sleep_short(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], clock: FakeClock
) -> None:
    job = submit(app, JobSpec(task="napper", payload={"seconds": 7200},
                              deadline_seconds=3600)).job
    deliver(app)
    asleep = app.store.get(job.job_id)
    assert asleep.state is JobState.SLEEPING
    assert asleep.run_at == job.created_at + 3600 * 1000  # woken at its deadline, not later
    clock.advance(3600)
    promote_due(app)
    deliver(app)
    dead = app.store.get(job.job_id)
    assert dead.state is JobState.DEAD and dead.error is not None
    assert dead.error.type == "DeadlineExceeded"
    assert ran == ["run", "before"]  # the handler never ran past its deadline


def test_an_attempt_started_just_before_the_job_s_deadline_is_stopped_at_it(
    app: Leasehold, registry: TaskRegistry, clock: FakeClock
) -> None:
    told: list[int] = []
    stopped: list[bool] = []

    @registry.task("overrun", retry=FAST)
    def overrun(payload: Any, ctx: JobContext) -> Any:
        told.append(ctx.deadline_ms)
        clock.advance(1)  # the handler works on, past the job's deadline
        stopped.append(ctx.wait_cancelled(5))  # the worker's loop tells it to stop
        return "too late"

    job = submit(app, JobSpec(task="overrun", deadline_seconds=10, timeout_seconds=600)).job
    clock.advance(9.8)  # started 0.2 s before the job's deadline
    # The response of the write that ends it is lost: its retry meets it.
    injector = inject(app, Fault(target="dynamodb.TransactWriteItems|dynamodb.UpdateItem",
                                 kind="lose", when=lambda params: "DeadlineExceeded" in
                                 json.dumps(params)))
    deliver(app)
    assert told == [job.created_at + 10_000]  # not the attempt's 600 s timeout
    assert stopped == [True]
    dead = app.store.get(job.job_id)
    assert (dead.state, dead.attempt) == (JobState.DEAD, 1)  # never retried
    assert dead.error is not None and dead.error.type == "DeadlineExceeded"
    assert sum(injector.injected.values()) == 1
    assert_every_live_job_can_wake(app, in_flight=messages_in_queues(app))
