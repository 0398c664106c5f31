"""Hand-off: the SQS message that names a QUEUED row.

A plain submission sends first (:func:`send_first`): the message goes out before the row is
put, and the row carries no ``sweep`` entry, so no write at hand-off time has to name the
row for the sweeper (issue 46). A worker that meets the message before the row keeps it
(hands it back) for :data:`ORPHAN_GRACE_MS` after it was sent, then drops it; the submitter
sends again when its put took longer than :data:`RESEND_AFTER_MS`. A send that fails makes
the row the outbox instead: it is put with its ``sweep`` entry (QUEUED, with a hand-off
deadline in ``lease_expires_at``) and the sweeper re-sends at the deadline. Submissions
written side by side (``submit_many``, ``POST /jobs/batch``) send first together, ten per
``SendMessageBatch`` (:class:`Gather`): an entry SQS refuses is a failed send, its row the
outbox. Every other entry into QUEUED (a retry, a promotion, a re-drive, a keyed item of a
batch) puts the row first and sends second, with the entry, as before.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.aws.queues import MAX_BATCH_ENTRIES, MAX_DELAY_SECONDS, Message, Queues
from leasehold.core.flowcontrol import GATE
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

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
    #: Sent before its row is put (stamped with ``now``, as :func:`send`'s ``first``).
    first: bool = False


def send_all(queues: Queues, pending: Sequence[Pending]) -> int:
    """Send several hand-offs, ten per ``SendMessageBatch`` by queue (a batch submission's);
    how many SQS took. An entry SQS refuses, or a call that fails past botocore's retries,
    is a failed :func:`send`: logged, and the row (QUEUED, with its hand-off deadline) is
    the outbox the sweeper re-sends from."""
    return len(_sent(queues, pending))


def _sent(queues: Queues, pending: Sequence[Pending]) -> set[str]:
    """:func:`send_all`'s sending: the ids of the jobs whose hand-off SQS took."""
    by_queue: dict[tuple[str, str], list[tuple[Job, Message, float]]] = defaultdict(list)
    for hand in pending:
        if hand.job.state in (JobState.QUEUED, JobState.SLEEPING):
            message, delay = _message(hand.job, hand.now, hand.not_before)
            if hand.first:
                message = replace(message, sent_at=hand.now)
            by_queue[(hand.job.pool, hand.job.priority)].append((hand.job, message, delay))
    sent: set[str] = set()
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
            sent.update(job.job_id for i, (job, _, _) in enumerate(chunk) if i not in failed)
    return sent


def send_first(queues: Queues, job: Job, now: int, *, held: bool = False) -> bool:
    """Send a new row's hand-off before it is put: with the other items of its
    :class:`Gather` when it is written side by side with them, else on its own (nothing,
    False, when ``held``: its submission holds hand-offs back to send after the puts)."""
    joined = _GATHER.get()
    if joined is not None:
        gather, index = joined
        return gather.send(index, job, now)
    return False if held else send(queues, job, now, first=True)


#: The gathering a send-first hand-off joins, and the item's place in it (:meth:`Gather.run`).
_GATHER: ContextVar[tuple[Gather, int] | None] = ContextVar("leasehold_gather", default=None)


class Gather:
    """The send-first hand-offs of up to :data:`MAX_BATCH_ENTRIES` submissions written side
    by side, one thread each: each item's hand-off waits until every other item of the
    gathering has either sent its own or ended, then all of them go out together
    (``SendMessageBatch``, in the items' order), and each item puts its row, with no
    ``sweep`` entry if SQS took its message and with one (the outbox) if not. One request
    instead of ten; each row's failure model is a single send-first's."""

    def __init__(self, queues: Queues, items: int) -> None:
        self._queues = queues
        self._open = set(range(items))  # items that may still send
        self._waiting: dict[int, Pending] = {}
        self._taken: dict[int, bool] = {}
        self._turn = threading.Condition()

    def run(self, index: int, call: Callable[[], T]) -> T:
        """``call()`` as item ``index`` of the gathering (in the caller's thread)."""
        token = _GATHER.set((self, index))
        try:
            return call()
        finally:
            _GATHER.reset(token)
            with self._turn:
                self._open.discard(index)
                self._flush_if_ready()

    def send(self, index: int, job: Job, now: int) -> bool:
        with self._turn:
            joined = index in self._open
            if joined:
                self._open.discard(index)
                self._waiting[index] = Pending(job, now, first=True)
                self._flush_if_ready()
                self._turn.wait_for(lambda: index in self._taken)
                return self._taken.pop(index)
        return send(self._queues, job, now, first=True)  # a second hand-off of one item

    def _flush_if_ready(self) -> None:
        """Send what waits once no other item can join it (under the lock: every other
        item of the gathering is waiting on it, or has ended)."""
        if self._open or not self._waiting:
            return
        waiting = sorted(self._waiting.items())
        self._waiting.clear()
        sent: set[str] = set()
        try:
            sent = _sent(self._queues, [hand for _, hand in waiting])
        except Exception:
            log.exception("hand-off of %d jobs failed; the sweeper will re-send them",
                          len(waiting))
        finally:  # never leave the others waiting, whatever this thread meets
            self._taken.update((index, hand.job.job_id in sent) for index, hand in waiting)
            self._turn.notify_all()


def _message(job: Job, now: int, not_before: int) -> tuple[Message, float]:
    due = max(job.run_at, not_before)
    delay = max(0.0, (due - now) / 1000)
    return Message(job.job_id, job.epoch, due if due > now else None,
                   timeout=job.timeout_seconds, gate=job.extra.get(GATE)), delay
