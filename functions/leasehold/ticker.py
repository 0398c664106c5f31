"""The ticker: promotes SCHEDULED jobs that fall due before the next tick.

It reads the sparse ``due`` index only (one query per shard), so its cost grows with the
number of due jobs, never with the number of stored ones. Jobs due before the next tick are
sent now with ``DelaySeconds``, so they start within about a second of their time although
the ticker runs once a minute.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leasehold import handoff
from leasehold.app import Leasehold
from leasehold.errors import Conflict, NotFound
from leasehold.states import JobState
from leasehold.store import Change

ACTOR = "ticker"


@dataclass
class PromoteReport:
    promoted: int = 0
    skipped: int = 0
    job_ids: list[str] = field(default_factory=list)


def promote_due(app: Leasehold, *, lookahead_seconds: float = 90.0,
                limit_per_shard: int = 1000) -> PromoteReport:
    now = app.now()
    until = now + int(min(lookahead_seconds, handoff.MAX_DELAY_SECONDS) * 1000)
    report = PromoteReport()
    for shard in range(app.settings.shards):
        for job_id in app.store.due(shard, until, limit_per_shard):
            try:
                job = app.store.get(job_id)
                if job.state is not JobState.SCHEDULED:
                    report.skipped += 1
                    continue
                change = Change(
                    target=JobState.QUEUED, actor=ACTOR, reason="due", bump_epoch=True,
                    set={"lease_expires_at": handoff.handoff_deadline(job.run_at, app.settings)},
                )
                new = app.store.transition(job, change, now=now)
            except (Conflict, NotFound):
                report.skipped += 1  # a concurrent tick or a cancel got there first
                continue
            handoff.send(app.queues, new, now)
            report.promoted += 1
            report.job_ids.append(job_id)
    return report


def tick(app: Leasehold) -> PromoteReport:
    """One pass of the ticker, as EventBridge (or a local loop) drives it."""
    return promote_due(app)
