"""A durable job re-run by hand (issue 29, item 8): what a manual retry keeps and re-arms.

Kept: succeeded steps, ``ctx.once`` results, completed callbacks, and each sleep's end.
Re-armed, with a fresh timeout and the same token: callbacks that timed out, were failed, or
were still open when the job ended. Through every manual re-run path (the API's retry, the
CLI's ``control.retry``, a dead-letter redrive, a bulk retry), and under the faults that
could lose the re-arm: a process killed right after the re-run's write, lost answers.
"""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.durable import callbacks, records
from leasehold.errors import NonRetryableError
from leasehold.lifecycle import control, sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.time.ticker import promote_due
from leasehold.workflows.progress import step_job_id

from .api_client import ApiClient
from .helpers import deliver, inject
from .workflow_helpers import run_until_idle, states

FAST = RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0)
HOUR = 3600


@pytest.fixture
def ran() -> list[str]:
    return []


@pytest.fixture
def tokens() -> list[str]:
    return []


@pytest.fixture
def tasks(registry: TaskRegistry, ran: list[str], tokens: list[str]) -> TaskRegistry:
    @registry.task("gated", retry=FAST, max_attempts=1)
    def gated(payload: Any, ctx: JobContext) -> Any:
        prepared = ctx.step("prepare", lambda: ran.append("prepare") or 1)
        charged = ctx.once("charge", lambda: ran.append("charge") or 2)
        cb = ctx.callback("approve", timeout_seconds=HOUR)
        tokens.append(cb.token)
        return {"approved": cb.wait(), "prepared": prepared, "charged": charged}

    @registry.task("napper", retry=FAST, max_attempts=1)
    def napper(payload: Any, ctx: JobContext) -> Any:
        ctx.sleep(2 * HOUR)
        return ctx.step("after", lambda: ran.append("after") or "woke")

    return registry


def _dead_on_timeout(app: Leasehold, clock: FakeClock) -> str:
    """A ``gated`` job whose callback timed out: DEAD on CallbackTimeout."""
    job = submit(app, JobSpec(task="gated")).job.job_id
    deliver(app)
    assert app.store.get(job).state is JobState.SLEEPING
    clock.advance(HOUR)
    promote_due(app)
    deliver(app)
    dead = app.store.get(job)
    assert dead.state is JobState.DEAD and dead.error is not None
    assert dead.error.type == "CallbackTimeout"
    return job


def _retry(app: Leasehold, job: str, path: str) -> None:
    api = ApiClient(app)
    if path == "api":
        assert api.post(f"/jobs/{job}/retry", tenant="default").status == 200
    elif path == "cli":
        control.retry(app, job, "default", actor="cli")
    elif path == "redrive":
        reply = api.post("/dead-letters/redrive", {"pool": "default"}, tenant="default")
        assert reply.body["redriven"] == [job], reply.body
    else:
        started = api.post("/jobs/bulk", {"action": "retry", "filter": {"state": ["DEAD"]}},
                           tenant="default")
        assert started.status == 202, started.body
        deliver(app, once=True)  # the bulk job runs and re-queues the DEAD job
    assert app.store.get(job).state is JobState.QUEUED


@pytest.mark.parametrize("path", ["api", "cli", "redrive", "bulk"])
def test_a_job_dead_on_callback_timeout_retried_waits_again_with_a_fresh_timeout_keeping_steps(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], tokens: list[str], clock: FakeClock,
    path: str
) -> None:
    job = _dead_on_timeout(app, clock)
    api = ApiClient(app)
    late = api.post(f"/callbacks/{tokens[0]}", "late", tenant="default").body
    assert (late["changed"], late["outcome"]) == (False, "timed_out")  # the job is DEAD
    retried_at = clock.now_ms()
    _retry(app, job, path)
    deliver(app)
    asleep = app.store.get(job)
    assert asleep.state is JobState.SLEEPING, asleep.error  # not DEAD again at once
    assert asleep.extra["waiting"] == "callback:approve"
    assert asleep.run_at >= retried_at + HOUR * 1000  # a fresh timeout
    shown = api.post(f"/callbacks/{tokens[0]}", "yes", tenant="default")
    assert (shown.status, shown.body["changed"]) == (200, True)
    deliver(app)
    done = app.store.get(job)
    assert done.state is JobState.SUCCEEDED
    assert done.result == {"approved": "yes", "prepared": 1, "charged": 2}
    assert ran == ["prepare", "charge"]  # the step and ctx.once kept their results
    assert len(set(tokens)) == 1  # the same token across runs


def test_a_failed_callback_is_re_armed_and_a_completion_before_the_replay_counts(
    app: Leasehold, tasks: TaskRegistry, tokens: list[str]
) -> None:
    job = submit(app, JobSpec(task="gated")).job.job_id
    deliver(app)
    assert callbacks.complete(app, tokens[0], "default", error="rejected").changed
    deliver(app)
    dead = app.store.get(job)
    assert dead.state is JobState.DEAD and dead.error is not None
    assert dead.error.type == "CallbackFailed"
    control.retry(app, job, "default")
    # Completed while the re-run job is still QUEUED, before its replay re-armed the record.
    done = callbacks.complete(app, tokens[0], "default", value="approved after all")
    assert (done.changed, done.outcome) == (True, "completed")
    assert not callbacks.complete(app, tokens[0], "default", value="twice").changed
    deliver(app)
    finished = app.store.get(job)
    assert finished.state is JobState.SUCCEEDED
    assert finished.result["approved"] == "approved after all"


def test_a_callback_left_open_by_a_cancel_waits_again_after_a_retry_past_its_timeout(
    app: Leasehold, tasks: TaskRegistry, tokens: list[str], clock: FakeClock
) -> None:
    job = submit(app, JobSpec(task="gated")).job.job_id
    deliver(app)
    control.cancel(app, job)
    clock.advance(2 * HOUR)  # its old timeout passed while the job was CANCELLED
    control.retry(app, job, "default")
    deliver(app)
    asleep = app.store.get(job)
    assert asleep.state is JobState.SLEEPING, asleep.error
    assert asleep.run_at == clock.now_ms() + HOUR * 1000
    assert records.get(app, job, "cb#approve")["timeout_at"] == asleep.run_at


def test_a_retry_keeps_each_sleeps_end(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], clock: FakeClock
) -> None:
    """A sleep is kept like a step: a re-run job cancelled while it slept sleeps to the same
    end, and one whose sleep ended meanwhile does not sleep again."""
    job = submit(app, JobSpec(task="napper")).job.job_id
    deliver(app)
    until = app.store.get(job).run_at
    clock.advance(60)
    control.cancel(app, job)
    control.retry(app, job, "default")
    deliver(app)
    asleep = app.store.get(job)
    assert asleep.state is JobState.SLEEPING and asleep.run_at == until
    control.cancel(app, job)
    clock.advance(2 * HOUR)
    control.retry(app, job, "default")
    deliver(app)
    done = app.store.get(job)
    assert done.state is JobState.SUCCEEDED and done.result == "woke" and ran == ["after"]


def test_the_re_arm_survives_a_process_killed_after_the_retry_and_lost_answers(
    app: Leasehold, tasks: TaskRegistry, tokens: list[str], clock: FakeClock
) -> None:
    """The re-run's own write counts the run; the re-arm happens at the replay. A process
    that dies between the two (here: before the hand-off message) loses nothing: the sweeper
    re-sends it, and the replay re-arms, though the re-arm's answer is lost."""
    job = _dead_on_timeout(app, clock)
    injector = inject(app, Fault(target="sqs.SendMessage", kind="crash"))
    with pytest.raises(InjectedCrash):
        control.retry(app, job, "default")
    injector.revive()
    assert app.store.get(job).state is JobState.QUEUED
    clock.advance(app.settings.handoff_seconds + 60)
    assert job in sweeper.sweep(app).job_ids
    def rearm(params: Any) -> bool:
        return any(entry.get("Update", {}).get("Key", {}).get("sk", {}).get("S") ==
                   "cb#approve" for entry in params.get("TransactItems", []))

    # The re-arm lands and its answer is lost past botocore's retries.
    injector.faults[:] = [Fault(target="dynamodb.TransactWriteItems", kind="lose-raise",
                                times=None, when=rearm)]
    deliver(app)
    assert injector.injected[("dynamodb.TransactWriteItems", "lose-raise")] == 1
    injector.faults.clear()
    asleep = app.store.get(job)
    assert asleep.state is JobState.SLEEPING, asleep.error
    record = records.get(app, job, "cb#approve")
    assert record is not None and "outcome" not in record
    assert callbacks.complete(app, tokens[0], "default", value="ok").changed
    deliver(app)
    assert app.store.get(job).state is JobState.SUCCEEDED


def test_a_workflow_retry_re_arms_the_callback_of_a_step_cancelled_while_it_waited(
    app: Leasehold, tasks: TaskRegistry, registry: TaskRegistry, tokens: list[str],
    ran: list[str], clock: FakeClock
) -> None:
    """A workflow retry re-runs the same job rows: its re-run steps count a run too."""
    failing = [True]

    @registry.task("fails_once", max_attempts=1)
    def fails_once(payload: Any, ctx: JobContext) -> str:
        if failing:
            raise NonRetryableError("the first run fails")
        return "fixed"

    api = ApiClient(app)
    flow = {"name": "approval", "steps": [{"id": "wait", "task": "gated"},
                                          {"id": "boom", "task": "fails_once"}]}
    wid = api.post("/workflows", flow, tenant="default").body["workflow_id"]
    deliver(app, once=True)  # "wait" goes to sleep on its callback, "boom" fails
    run_until_idle(app)
    assert states(app, wid) == {"wait": "CANCELLED", "boom": "DEAD"}
    assert tokens  # "wait" made its callback before it was cancelled
    clock.advance(2 * HOUR)  # past the callback's timeout while the workflow is FAILED
    failing.clear()
    assert api.post(f"/workflows/{wid}/retry", tenant="default").status == 200
    run_until_idle(app)
    waiting = app.store.get(step_job_id(wid, "wait", "default"))
    assert waiting.state is JobState.SLEEPING, waiting.error  # waits again, not timed out
    assert callbacks.complete(app, tokens[0], "default", value="ok").changed
    run_until_idle(app)
    assert states(app, wid) == {"wait": "SUCCEEDED", "boom": "SUCCEEDED"}
    assert ran == ["prepare", "charge"]  # the re-run step kept its step and its ctx.once
