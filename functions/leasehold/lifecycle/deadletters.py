"""Dead letters: DEAD jobs are listed from their rows (the record) and redriven from there.

Each DEAD job also has a copy in its pool's DLQ, where operators look for failures. A redrive
re-queues the tenant's DEAD rows, each through admission like a submission (the API passes
it in), and then removes DLQ copies whose job is no longer DEAD; copies of other tenants' jobs
are made visible again untouched.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound, RateLimited
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.settings import PRIORITIES
from leasehold.tenancy.listing import JobFilter, list_jobs

log = logging.getLogger(__name__)
ACTOR = "redrive"
REASON = "dead-letter redrive"


#: Re-runs one DEAD job by id (a manual retry, usually through admission), or raises
#: :class:`~leasehold.errors.RateLimited` when its tenant's rate, cap or backlog says no.
Retry = Callable[[str], object]


@dataclass
class RedriveReport:
    redriven: list[str] = field(default_factory=list)
    stale_removed: int = 0
    #: DEAD jobs listed but left DEAD because admission refused them, and why.
    left_in_place: int = 0
    left_because: str | None = None
    retry_after: float | None = None


def redrive(app: Leasehold, tenant: str, *, pool: str, task: str | None = None,
            limit: int = 100, retry: Retry | None = None) -> RedriveReport:
    """Re-queue up to ``limit`` of the tenant's DEAD jobs of ``pool``, each through ``retry``
    (default: :func:`control.retry`, which refuses jobs that hold a live-job slot; the API
    passes its admission). Moves what admission lets through: at the first refusal (rate,
    live-job cap, backlog) the rest stay DEAD and the report says how many and why."""
    report = RedriveReport()
    if retry is None:
        def retry(job_id: str) -> object:
            return control.retry(app, job_id, tenant, actor=ACTOR, reason=REASON)
    dead, _ = list_jobs(app, tenant, limit=limit,
                        where=JobFilter(states={JobState.DEAD}, task=task, pool=pool))
    for position, job in enumerate(dead):
        try:
            retry(job.job_id)
        except RateLimited as refused:
            report.left_in_place = len(dead) - position
            report.left_because = str(refused)
            report.retry_after = refused.retry_after
            break
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
