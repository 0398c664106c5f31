"""The sweeper: re-drives jobs whose lease expired or whose hand-off was lost.

It reads the sparse ``leases`` index only, so its cost grows with the number of expired
leases, never with the size of the table.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change, LeaseRef
from leasehold.lifecycle.worker import bury, retry_change

log = logging.getLogger(__name__)
ACTOR = "sweeper"


@dataclass
class SweepReport:
    examined: int = 0
    redispatched: int = 0   # QUEUED, hand-off lost: sent again
    recovered: int = 0      # RUNNING, worker lost: queued again (a crash recovery)
    dead: int = 0           # poison pills and exhausted attempts
    cancelled: int = 0
    skipped: int = 0        # changed under us (a heartbeat or a finish won): nothing to do
    #: What each repair pass (``Leasehold.repairs``) repaired.
    repaired: dict[str, int] = field(default_factory=dict)
    job_ids: list[str] = field(default_factory=list)


def sweep(app: Leasehold, *, limit_per_shard: int = 500) -> SweepReport:
    now = app.now()
    # A lease counts as expired only past the skew grace, so a worker whose clock runs a few
    # seconds behind ours never loses a lease it still believes it holds.
    cutoff = now - int(app.settings.skew_grace_seconds * 1000)
    report = SweepReport()
    for shard in range(app.settings.shards):
        for ref in app.store.expired_leases(shard, cutoff, limit_per_shard):
            report.examined += 1
            try:
                _recover(app, ref, now, cutoff, report)
            except (Conflict, NotFound):
                report.skipped += 1
    # The features' own repairs (workflows that made no progress for a while, ...): each
    # redoes what a process that died between two writes left undone, idempotently.
    for name, repair in app.repairs.items():
        report.repaired[name] = repair(app, now)
    return report


def _recover(app: Leasehold, ref: LeaseRef, now: int, cutoff: int, report: SweepReport) -> None:
    job = app.store.get(ref.job_id)
    if job.epoch != ref.epoch or job.state is not ref.state or \
            job.lease_expires_at is None or job.lease_expires_at >= cutoff:
        report.skipped += 1
        return
    if job.state is JobState.QUEUED:
        change = Change(
            target=JobState.QUEUED, actor=ACTOR, reason="hand-off overdue, re-sent",
            bump_epoch=True,
            set={"run_at": now, "lease_expires_at": handoff.handoff_deadline(now, app.settings)},
        )
        new = app.store.transition(job, change, now=now)
        handoff.send(app.queues, new, now)
        report.redispatched += 1
    else:
        _recover_running(app, job, now, report)
    report.job_ids.append(job.job_id)


def _recover_running(app: Leasehold, job: Job, now: int, report: SweepReport) -> None:
    crashes = job.crash_count + 1
    message = f"lease expired on attempt {job.attempt}: the worker was lost"
    error_item = {"type": "LeaseExpired", "message": message, "traceback": "",
                  "types": ["LeaseExpired"]}
    if job.cancel_requested:
        app.store.transition(job, Change(target=JobState.CANCELLED, actor=ACTOR,
                                         reason="cancel requested; worker lost",
                                         set={"finished_at": now}), now=now)
        report.cancelled += 1
        return
    reason = None
    if crashes >= app.settings.max_crash_recoveries:
        reason = f"poison pill: its worker was lost {crashes} times"
    elif job.attempt >= job.max_attempts:
        reason = f"attempts exhausted ({job.attempt}/{job.max_attempts}); last worker lost"
    if reason is not None:
        dead = app.store.transition(
            job, Change(target=JobState.DEAD, actor=ACTOR, reason=reason,
                        increment={"crash_count": 1},
                        set={"error": error_item, "finished_at": now}), now=now)
        bury(app, dead, reason)
        report.dead += 1
        return
    new = app.store.transition(
        job, retry_change(app, now, now, ACTOR, owner=None, error_item=error_item,
                          reason="lease expired (crash recovery)", increment={"crash_count": 1}),
        now=now)
    handoff.send(app.queues, new, now)
    report.recovered += 1
