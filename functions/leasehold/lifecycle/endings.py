"""What ending an attempt writes, shared by the worker (its handler's outcome) and the
sweeper (a lost worker's): the failed attempt's error, the change back to QUEUED or
SCHEDULED for a retry, and a DEAD job's copy in its pool's dead-letter queue."""

from __future__ import annotations

import logging
from typing import Any

from leasehold.core.failures import deadline_exceeded
from leasehold.core.jobs import Job, with_attempt_error
from leasehold.core.states import JobState
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change
from leasehold.lifecycle.store_base import DEADLINE

log = logging.getLogger(__name__)


def error_sets(job: Job, error_item: dict[str, Any]) -> dict[str, Any]:
    """What a failed attempt writes: its error, and the same added to the kept ones."""
    return {"error": error_item, "attempt_errors": with_attempt_error(job, error_item)}


def retry_change(app: Leasehold, job: Job, run_at: int, now: int, actor: str, *,
                 owner: str | None, error_item: dict[str, Any] | None, reason: str,
                 increment: dict[str, int] | None = None) -> Change:
    """Back to QUEUED with a new epoch (or SCHEDULED when SQS cannot hold the delay).

    Refused when a cancel was requested: a retry must never carry a cancel into the next
    attempt, where nobody would look at it.
    """
    sets: dict[str, Any] = {"run_at": run_at}
    if error_item is not None:
        sets.update(error_sets(job, error_item))
    if handoff.within_sqs_delay(run_at, now):
        sets["lease_expires_at"] = handoff.handoff_deadline(run_at, app.settings)
        return Change(target=JobState.QUEUED, actor=actor, reason=reason, owner=owner,
                      bump_epoch=True, set=sets, increment=increment or {},
                      remove=("lease_owner",), unless_cancel_requested=True)
    return Change(target=JobState.SCHEDULED, actor=actor, reason=reason, owner=owner,
                  set=sets, increment=increment or {}, remove=("lease_owner",),
                  unless_cancel_requested=True)


def end_past_deadline(app: Leasehold, job: Job, now: int, actor: str) -> bool:
    """End a QUEUED job whose ``deadline_at`` passed before any lease: DEAD with
    DeadlineExceeded, as the worker that leased it would end it, giving back what it holds
    (its tenant slot, its place on a key) through the transition's companions. False when
    its deadline has not passed. Raises Conflict when the row changed meanwhile."""
    deadline = job.extra.get(DEADLINE)
    if job.state is not JobState.QUEUED or deadline is None or now < int(deadline):
        return False
    failure = deadline_exceeded("the job's deadline passed before any attempt started")
    error_item = {"type": failure.type, "message": failure.message,
                  "traceback": failure.traceback, "types": list(failure.types)}
    reason = "deadline passed before any lease"
    dead = app.store.transition(job, Change(
        target=JobState.DEAD, actor=actor, reason=reason,
        set={**error_sets(job, error_item), "finished_at": now}), now=now)
    bury(app, dead, reason)
    log.info("job %s ended DEAD: its deadline passed while it waited", job.job_id)
    return True


def bury(app: Leasehold, job: Job, reason: str) -> None:
    """Copy a DEAD job to its pool's DLQ (the row stays the record)."""
    try:
        app.queues.send_dead(job.pool, job.priority, job.job_id, reason)
    except Exception:
        log.warning("could not copy dead job %s to its DLQ", job.job_id, exc_info=True)
