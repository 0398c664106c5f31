"""Dead letters: DEAD jobs are listed from their rows (the record) and redriven from there.

Each DEAD job also has a copy in its pool's DLQ, where operators look for failures and which
the DLQ alarm watches. The DLQs hold one message per DEAD job and whatever no row accounts for
(nothing, unless something is wrong): the sweeper's :func:`tidy` pass removes the rest, which
every way back from DEAD leaves there (an API, CLI, console or bulk retry, a redrive, a
deleted row), as well as a second copy of a job that died again, and a message SQS moved
there after 5 receives whose row went on. SQS cannot delete a message by its content, so a
retry could only remove its copy by reading the whole DLQ; one pass reads it for all of
them, whichever path put the job back, and a pass cut short is simply done again by the next.
A redrive re-queues the tenant's DEAD rows, each through admission like a submission (the
API passes it in), and then tidies the pool's DLQs at once.
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
        report.stale_removed = tidy(app, pool)
    return report


#: How long a pass keeps the messages it read invisible: a pass that dies (a sweeper killed
#: between reading and deleting) leaves them to the next pass after this.
TIDY_VISIBILITY_SECONDS = 30
#: The sweeper tidies each pool's DLQs at most this often (a pass reads every message).
TIDY_EVERY_MS = 30_000
#: The DLQ messages one pass reads per queue at most.
TIDY_MAX_MESSAGES = 1_000
#: When the sweeper last tidied each pool's DLQs (by queue prefix and pool), on the app's
#: clock: per process, which is all a cadence needs (a second sweeper only tidies again).
_tidied: dict[tuple[str, str], int] = {}


def tidy_due(app: Leasehold, now: int) -> int:
    """The sweeper's pass: tidy the DLQs of each pool not tidied for ``TIDY_EVERY_MS``;
    returns how many messages it removed."""
    removed = 0
    for pool in app.settings.pools:
        key = (app.settings.queue_prefix, pool)
        if now - _tidied.get(key, -TIDY_EVERY_MS) < TIDY_EVERY_MS:
            continue
        _tidied[key] = now
        try:
            removed += tidy(app, pool)
        except Exception:  # the next pass does it: deleting later is all that is lost
            log.warning("could not tidy the DLQs of pool %s", pool, exc_info=True)
    return removed


def tidy(app: Leasehold, pool: str, *, visibility_seconds: int = TIDY_VISIBILITY_SECONDS,
         max_messages: int = TIDY_MAX_MESSAGES) -> int:
    """Leave in the pool's DLQs one message per DEAD job and what no row accounts for;
    delete the rest. Returns how many it deleted.

    Each queue is read whole (up to ``max_messages``), each message kept invisible until the
    pass ends, so none is read twice; the kept ones are then made visible again. A delete
    that fails (a throttle past retries) or a pass that dies leaves its messages to the
    next pass once ``visibility_seconds`` have passed: deleting twice, or not yet, is safe.
    """
    removed = 0
    for priority in PRIORITIES:
        url = app.queues.dlq_url(pool, priority)
        #: The message kept for each DEAD job (by id: a pass slower than the visibility
        #: window reads a kept message again, and must not take it for a second copy).
        kept: dict[str, str] = {}
        keep: list[str] = []
        read = 0
        while read < max_messages:
            batch = app.queues.receive(url, max_messages=10,
                                       visibility_seconds=visibility_seconds)
            if not batch:
                break
            read += len(batch)
            ids = [(message, _job_id(message.body)) for message in batch]
            rows = {job.job_id: job for job in app.store.batch_get(
                sorted({job_id for _, job_id in ids if job_id}))}
            stale = []
            for message, job_id in ids:
                handle = message.receipt_handle
                if not job_id:
                    keep.append(handle)  # not ours: a person should look at it
                elif job_id in rows and rows[job_id].state is JobState.DEAD and \
                        kept.setdefault(job_id, message.message_id) == message.message_id:
                    keep.append(handle)  # the DEAD job's one copy
                else:
                    stale.append(handle)  # retried, finished, deleted, or a second copy
            app.queues.delete(url, stale)
            removed += len(stale)
        app.queues.extend_all(url, keep, 0)
    return removed


def _job_id(body: str) -> str:
    try:
        return str(json.loads(body)["job_id"])
    except (ValueError, KeyError, TypeError):
        return ""
