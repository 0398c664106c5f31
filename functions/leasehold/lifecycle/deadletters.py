"""Dead letters: DEAD jobs are listed from their rows (the record) and redriven from there.

Each DEAD job also has a copy in its pool's DLQ, where operators look for failures. A redrive
re-queues the tenant's DEAD rows and then removes DLQ copies whose job is no longer DEAD;
copies of other tenants' jobs are made visible again untouched.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.settings import PRIORITIES
from leasehold.tenancy.listing import JobFilter, list_jobs

log = logging.getLogger(__name__)
ACTOR = "redrive"


@dataclass
class RedriveReport:
    redriven: list[str] = field(default_factory=list)
    stale_removed: int = 0


def redrive(app: Leasehold, tenant: str, *, pool: str, task: str | None = None,
            limit: int = 100) -> RedriveReport:
    report = RedriveReport()
    dead, _ = list_jobs(app, tenant, limit=limit,
                        where=JobFilter(states={JobState.DEAD}, task=task, pool=pool))
    for job in dead:
        try:
            control.retry(app, job.job_id, tenant, actor=ACTOR, reason="dead-letter redrive")
        except (Conflict, NotFound):
            continue  # retried concurrently: someone else redrove it
        report.redriven.append(job.job_id)
    if report.redriven:
        report.stale_removed = prune_dlq(app, pool)
    return report


def prune_dlq(app: Leasehold, pool: str, *, max_batches: int = 10) -> int:
    """Delete DLQ copies whose job is no longer DEAD; returns how many."""
    removed = 0
    for priority in PRIORITIES:
        url = app.queues.dlq_url(pool, priority)
        for _ in range(max_batches):
            # A short visibility window: the copies we keep come back at once for others.
            batch = app.queues.receive(url, max_messages=10, visibility_seconds=5)
            if not batch:
                break
            ids = {}
            for message in batch:
                try:
                    ids[message.receipt_handle] = str(json.loads(message.body)["job_id"])
                except (ValueError, KeyError, TypeError):
                    ids[message.receipt_handle] = ""
            rows = {job.job_id: job for job in app.store.batch_get(
                [i for i in ids.values() if i])}
            stale = [handle for handle, job_id in ids.items()
                     if job_id not in rows or rows[job_id].state is not JobState.DEAD]
            keep = [handle for handle in ids if handle not in stale]
            app.queues.delete(url, stale)
            for handle in keep:
                app.queues.extend(url, handle, 0)
            removed += len(stale)
            if not stale:
                break  # only live copies left at the head of the queue
    return removed
