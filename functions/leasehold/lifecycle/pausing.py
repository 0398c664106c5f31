"""Pausing one job: it does not start until it is resumed (issue 36).

The pause is a hold on the row (``paused_at``, :mod:`leasehold.core.holds`), written without
a transition: the job keeps its state and every way it has to wake, and the lease refuses it
(its own condition), so a paused job never starts, holds no lease and no concurrency slot.

- QUEUED, SCHEDULED, SLEEPING (a sleep or a callback), WAITING (a workflow step): the hand-off
  that would start it (its message, the ticker's promotion, a callback's or a child's
  wake-up, the flow waker) meets the refused lease and is done with; the job stays (or
  becomes) QUEUED, its sweep entry moved on by the sweeper without a re-send (a QUEUED row
  sent first, which has no entry, is given one by the pause's write). A start window
  that passes meanwhile ends it EXPIRED as for a paused concurrency key: by the worker whose
  lease was refused, or by the sweeper at its hand-off deadline (never later than
  ``start_by``).
- RUNNING: its attempt goes on and ends as it would; the next one (a retry, a wake-up after a
  suspension) is held.

Resume lifts the hold with the same fence and hands a QUEUED job (or a short sleep's
SLEEPING one) off again at its epoch: a duplicate of a message still in flight is fenced by
the epoch, and a resume whose process dies before the send leaves a QUEUED row whose sweep
entry re-sends it. A job keeps its hold when it ends (a RUNNING paused job that finishes, a
cancel): a manual re-run of it is QUEUED still paused; only a resume lifts a pause.
"""

from __future__ import annotations

from typing import Any

from leasehold.core.holds import PAUSED_AT
from leasehold.core.ids import shard_of
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.errors import Conflict
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.control import get_job
from leasehold.lifecycle.store import ConditionFailed, sweep_bound

#: How many times a pause or a resume reads the row again when it moved under the write.
TRIES = 5


def pause(app: Leasehold, job_id: str, tenant: str | None = None) -> Job:
    """Hold a live job; an already paused one is answered as it is (idempotent)."""
    for _ in range(TRIES):
        job = get_job(app, job_id, tenant)
        if job.state.terminal:
            raise Conflict(f"job {job_id} already finished ({job.state}): nothing to pause",
                           job_id=job_id)
        if job.extra.get(PAUSED_AT) is not None:
            return job
        try:
            return app.store.set_hold(job, set={PAUSED_AT: app.now(), **_watched(app, job)},
                                      remove=())
        except ConditionFailed:
            continue  # leased, woken or handed off meanwhile: pause it as it is now
    raise Conflict(f"job {job_id} kept changing; try again", job_id=job_id)


def _watched(app: Leasehold, job: Job) -> dict[str, Any]:
    """The ``sweep`` entry a paused QUEUED row must carry: its message meets the hold and is
    done with, and a resume killed before its send is re-sent from it. A row sent first has
    none (issue 46); one put first gets it again, never below ``now`` (a frontier)."""
    if job.state is not JobState.QUEUED:
        return {}
    now = app.now()
    deadline = max(int(job.lease_expires_at or now), now)
    return {"lease_expires_at": deadline,
            "sweep_shard": shard_of(job.job_id, app.settings.shards),
            "sweep_at": sweep_bound(now, deadline, app.settings)}


def resume(app: Leasehold, job_id: str, tenant: str | None = None) -> Job:
    """Lift a job's pause and hand it off again if it waits in a queue; a job that is not
    paused is answered as it is."""
    for _ in range(TRIES):
        job = get_job(app, job_id, tenant)
        if job.extra.get(PAUSED_AT) is None:
            return job
        try:
            new = app.store.set_hold(job, set={}, remove=(PAUSED_AT,))
        except ConditionFailed:
            continue
        now = app.now()
        # A QUEUED job's message met the hold and is gone; a short sleep's may be too. A
        # long sleep, a SCHEDULED or WAITING job still has its own way to wake.
        if new.state is JobState.QUEUED or (
                new.state is JobState.SLEEPING and new.lease_expires_at is not None
                and handoff.within_sqs_delay(new.run_at, now)):
            handoff.send(app.queues, new, now)
        return new
    raise Conflict(f"job {job_id} kept changing; try again", job_id=job_id)
