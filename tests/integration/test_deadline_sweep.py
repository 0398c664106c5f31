"""A QUEUED job's hand-off deadline is never later than its deadline_at (issue 29, F6): a job
whose message was lost and whose deadline passes is ended by the first sweep after it, not
left QUEUED until the 15-minute hand-off deadline. (``tests/mutants`` puts the bug back.)"""

from __future__ import annotations

from typing import Any

from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit

from .helpers import inject, receive_all


def test_a_job_whose_message_was_lost_ends_dead_at_the_first_sweep_past_its_deadline(
        app: Leasehold, registry: TaskRegistry, clock: FakeClock) -> None:
    runs: list[Any] = []
    registry.task("plain")(lambda payload, ctx: runs.append(payload))
    injector = inject(app, Fault(target="sqs.SendMessage", kind="fail", times=1))
    job = submit(app, JobSpec(task="plain", payload=1, deadline_seconds=60)).job
    assert injector.injected  # the hand-off was lost: only the sweeper will look at it
    row = app.store.get(job.job_id)
    assert row.lease_expires_at is not None
    assert row.lease_expires_at <= int(row.extra["deadline_at"])
    clock.advance(60 + app.settings.skew_grace_seconds + 1)
    sweeper.sweep(app)
    ended = app.store.get(job.job_id)
    assert ended.state is JobState.DEAD, ended.state
    assert ended.error is not None and ended.error.type == "DeadlineExceeded"
    assert receive_all(app) == [] and runs == []
