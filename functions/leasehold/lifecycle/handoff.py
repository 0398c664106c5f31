"""Hand-off: the SQS message that names a QUEUED row.

A plain submission sends first (:func:`send_first`): the message goes out before the row is
put, and the row carries no ``sweep`` entry, so no write at hand-off time has to name the
row for the sweeper (issue 46). A worker that meets the message before the row keeps it
(hands it back) for :data:`ORPHAN_GRACE_MS` after it was sent, then drops it; the submitter
sends again when its put took longer than :data:`RESEND_AFTER_MS`. A send that fails makes
the row the outbox instead: it is put with its ``sweep`` entry (QUEUED, with a hand-off
deadline in ``lease_expires_at``) and the sweeper re-sends at the deadline. Every other
entry into QUEUED (a retry, a promotion, a re-drive, a batch's items) puts the row first and
sends second, with the entry, as before.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.aws.queues import MAX_BATCH_ENTRIES, MAX_DELAY_SECONDS, Message, Queues
from leasehold.core.flowcontrol import GATE
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.settings import Settings

log = logging.getLogger(__name__)

#: How long after a send-first message was sent a worker that finds no row for it keeps it
#: (handing it back) before it drops it. The submitter sends again when its put took more
#: than :data:`RESEND_AFTER_MS`, so a row that lands later than the first message's grace
#: has a newer message; the margin between the two is well above the skew grace between
#: two processes' clocks.
ORPHAN_GRACE_MS = 30_000
RESEND_AFTER_MS = 10_000
#: How long a worker hands back a message whose row it did not find, at most.
ORPHAN_RECHECK_SECONDS = 2


def handoff_deadline(run_at: int, settings: Settings) -> int:
    """When a QUEUED job that has not been leased counts as lost in hand-off."""
    return run_at + int(settings.handoff_seconds * 1000)


def within_sqs_delay(run_at: int, now: int) -> bool:
    return run_at - now <= MAX_DELAY_SECONDS * 1000


def send(queues: Queues, job: Job, now: int, *, not_before: int = 0,
         first: bool = False) -> bool:
    """Send the job's hand-off message, due at its ``run_at`` (or ``not_before``, if later);
    False (logged) if SQS refused: the sweeper re-sends. ``first``: sent before the row is
    put (stamped with ``now``, so a worker that finds no row knows how long to keep it)."""
    if job.state not in (JobState.QUEUED, JobState.SLEEPING):
        return False
    message, delay = _message(job, now, not_before)
    if first:
        message = replace(message, sent_at=now)
    try:
        # The tenant as message group: SQS fair queues keep a quiet tenant's wait short
        # while another floods the queue.
        queues.send(job.pool, job.priority, message, delay, group=job.tenant)
    except (ClientError, BotoCoreError):
        log.warning("hand-off of %s failed; the sweeper will re-send it", job.job_id,
                    exc_info=True)
        return False
    return True


@dataclass(frozen=True)
class Pending:
    """A hand-off held back to be sent with others (:func:`send_all`)."""

    job: Job
    now: int
    not_before: int = 0


def send_all(queues: Queues, pending: Sequence[Pending]) -> int:
    """Send several hand-offs, ten per ``SendMessageBatch`` by queue (a batch submission's);
    how many SQS took. An entry SQS refuses, or a call that fails past botocore's retries,
    is a failed :func:`send`: logged, and the row (QUEUED, with its hand-off deadline) is
    the outbox the sweeper re-sends from."""
    by_queue: dict[tuple[str, str], list[tuple[Job, Message, float]]] = defaultdict(list)
    for hand in pending:
        if hand.job.state in (JobState.QUEUED, JobState.SLEEPING):
            message, delay = _message(hand.job, hand.now, hand.not_before)
            by_queue[(hand.job.pool, hand.job.priority)].append((hand.job, message, delay))
    sent = 0
    for (pool, priority), entries in by_queue.items():
        for start in range(0, len(entries), MAX_BATCH_ENTRIES):
            chunk = entries[start:start + MAX_BATCH_ENTRIES]
            try:
                failed = queues.send_batch(pool, priority, [(message, delay, job.tenant)
                                                            for job, message, delay in chunk])
            except (ClientError, BotoCoreError):
                log.warning("hand-off of %d jobs failed; the sweeper will re-send them",
                            len(chunk), exc_info=True)
                continue
            for index in failed:
                log.warning("hand-off of %s refused; the sweeper will re-send it",
                            chunk[index][0].job_id)
            sent += len(chunk) - len(failed)
    return sent


def _message(job: Job, now: int, not_before: int) -> tuple[Message, float]:
    due = max(job.run_at, not_before)
    delay = max(0.0, (due - now) / 1000)
    return Message(job.job_id, job.epoch, due if due > now else None,
                   timeout=job.timeout_seconds, gate=job.extra.get(GATE)), delay
