"""Hand-off: the job row is the outbox; the SQS message follows it.

The row is written first (QUEUED, with a hand-off deadline in ``lease_expires_at``) and the
message sent second. If the process dies between the two, the sweeper finds the QUEUED row
past its deadline and sends again, so a crash there loses nothing.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.aws.queues import MAX_BATCH_ENTRIES, MAX_DELAY_SECONDS, Message, Queues
from leasehold.core.flowcontrol import GATE
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.settings import Settings

log = logging.getLogger(__name__)


def handoff_deadline(run_at: int, settings: Settings) -> int:
    """When a QUEUED job that has not been leased counts as lost in hand-off."""
    return run_at + int(settings.handoff_seconds * 1000)


def within_sqs_delay(run_at: int, now: int) -> bool:
    return run_at - now <= MAX_DELAY_SECONDS * 1000


def send(queues: Queues, job: Job, now: int, *, not_before: int = 0) -> bool:
    """Send the job's hand-off message, due at its ``run_at`` (or ``not_before``, if later);
    False (logged) if SQS refused: the sweeper re-sends."""
    if job.state not in (JobState.QUEUED, JobState.SLEEPING):
        return False
    message, delay = _message(job, now, not_before)
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
