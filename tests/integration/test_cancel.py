from __future__ import annotations

from typing import Any

import pytest

from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle import control, sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit

from .helpers import deliver, submit_swept


def test_a_queued_job_is_cancelled_at_once_and_its_message_never_runs(
    app: Leasehold, registry: TaskRegistry
) -> None:
    ran = []
    registry.task("echo")(lambda payload, ctx: ran.append(payload))
    job = submit(app, JobSpec(task="echo", payload=1)).job
    cancelled = control.cancel(app, job.job_id)
    assert cancelled.state is JobState.CANCELLED
    assert deliver(app) == 1  # the message is acknowledged as stale
    assert ran == []
    assert app.store.get(job.job_id).state is JobState.CANCELLED
    with pytest.raises(Conflict):
        control.cancel(app, job.job_id)


@pytest.mark.ddblocal
def test_a_running_job_sees_the_cancel_at_its_next_heartbeat_and_ends_cancelled(
    make_app: Any, registry: TaskRegistry
) -> None:
    app = make_app(lease_seconds=1.0)  # background heartbeats every third of a second
    seen = {}

    @registry.task("long")
    def long(payload: Any, ctx: JobContext) -> Any:
        flagged = control.cancel(app, ctx.job_id)  # a user cancels while it runs
        seen["flagged"] = (flagged.state, flagged.cancel_requested)
        seen["woke"] = ctx.wait_cancelled(5)
        seen["reason"] = ctx.cancel_reason
        return "finished anyway"

    job = submit(app, JobSpec(task="long")).job
    assert deliver(app) == 1
    assert seen == {"flagged": (JobState.RUNNING, True), "woke": True,
                    "reason": "cancel requested"}
    done = app.store.get(job.job_id)
    assert done.state is JobState.CANCELLED
    assert done.result is None


@pytest.mark.ddblocal
def test_a_cancel_requested_on_a_lost_worker_ends_cancelled_at_the_sweep(
    app: Leasehold, registry: TaskRegistry, clock: FakeClock
) -> None:
    registry.task("echo")(lambda payload, ctx: payload)
    job = submit_swept(app, JobSpec(task="echo")).job
    # A lease as long as the settings say (the sweep index's bound assumes no shorter one).
    lease_ms = int(app.settings.lease_seconds * 1000)
    app.store.lease(job.job_id, job.epoch, owner="gone", now=app.now(),
                    expires_at=app.now() + lease_ms, actor="gone")
    control.cancel(app, job.job_id)
    clock.advance(app.settings.lease_seconds + app.settings.skew_grace_seconds + 1)
    assert sweeper.sweep(app).cancelled == 1
    assert app.store.get(job.job_id).state is JobState.CANCELLED


def test_another_tenants_job_is_not_found(app: Leasehold, registry: TaskRegistry) -> None:
    registry.task("echo")(lambda payload, ctx: payload)
    job = submit(app, JobSpec(task="echo", tenant="acme")).job
    with pytest.raises(NotFound):
        control.cancel(app, job.job_id, tenant="globex")
    with pytest.raises(NotFound):
        control.get_job(app, job.job_id, tenant="globex")
    assert app.store.get(job.job_id).state is JobState.QUEUED


def test_a_dead_job_can_be_retried_from_scratch(
    app: Leasehold, registry: TaskRegistry
) -> None:
    outcomes = iter([RuntimeError("boom"), None])

    @registry.task("once-broken", max_attempts=1)
    def once_broken(payload: Any, ctx: JobContext) -> Any:
        error = next(outcomes)
        if error:
            raise error
        return "fixed"

    job = submit(app, JobSpec(task="once-broken")).job
    deliver(app)
    assert app.store.get(job.job_id).state is JobState.DEAD
    with pytest.raises(Conflict):
        control.cancel(app, job.job_id)  # already finished
    retried = control.retry(app, job.job_id)
    assert (retried.state, retried.attempt) == (JobState.QUEUED, 0)
    deliver(app)
    done = app.store.get(job.job_id)
    assert (done.state, done.result, done.attempt) == (JobState.SUCCEEDED, "fixed", 1)
