"""Leasing a message's job, and the checks before its attempt starts.

What every worker does before it runs anything, in-process or over HTTP
(:meth:`leasehold.lifecycle.worker.Worker.take`): parse the hand-off, wait out a rounded-down
SQS delay, take the fenced lease (with flow control's gate), and refuse to start a job that was
cancelled, is past its deadline, or whose lease ran out before it was granted.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import secrets
import socket
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from leasehold.aws.queues import Message
from leasehold.core.failures import deadline_exceeded
from leasehold.core.jobs import Job, JobError
from leasehold.core.states import JobState
from leasehold.errors import Conflict, LeaseholdError, NotFound, StaleMessage
from leasehold.lifecycle import handoff, sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Gated
from leasehold.lifecycle.submission import DEADLINE

log = logging.getLogger(__name__)

#: The most a worker waits for a message that arrived before its job is due (SQS delays are
#: whole seconds, so one second is the most it should ever be, plus some clock skew).
MAX_EARLY_WAIT_SECONDS = 2.0


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    RETRYING = "retrying"
    DEAD = "dead"
    CANCELLED = "cancelled"
    STALE = "stale"          # duplicate or superseded message: acknowledged, nothing ran
    LEASE_LOST = "lease_lost"  # ran, but a newer lease took over: result discarded
    GATED = "gated"          # waits for flow control (parked, throttled): nothing ran
    SLEEPING = "sleeping"    # a durable handler suspended itself: no lease until it wakes


@dataclass(frozen=True)
class Delivery:
    """One SQS message as the worker needs it (from Lambda's event or from a poll)."""

    body: str
    queue_url: str | None = None
    receipt_handle: str | None = None
    #: Called on each heartbeat to keep the message invisible (the consumer knows for how
    #: long, and which other messages of the batch must stay hidden); by default the
    #: heartbeat extends this message's visibility by two leases.
    keep_invisible: Callable[[], None] | None = None
    #: The SQS message id (what tracing reports as ``messaging.message.id``).
    message_id: str | None = None


def worker_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def lease(app: Leasehold, worker_id: str, delivery: Delivery) -> tuple[Job, str, int] | Outcome:
    """The lease of the message's job: (the job as leased, its owner, the lease's time),
    or the outcome of a message whose lease is refused (stale, gated)."""
    try:
        message = Message.parse(delivery.body)
    except StaleMessage:
        log.warning("acknowledging a message that is not a hand-off: %r", delivery.body[:200])
        return Outcome.STALE
    early = (message.run_at - app.now()) / 1000 if message.run_at is not None else 0.0
    if early > 0:
        # The SQS delay was rounded down to whole seconds: wait out the rest so the job
        # starts at its time, never before. More than that would be a clock far off.
        app.clock.sleep(min(early, MAX_EARLY_WAIT_SECONDS))
    now = app.now()
    app.guard_work(now)  # a fenced cell takes no lease: the message comes back
    owner = f"{worker_id}:{secrets.token_hex(4)}"
    lease_ms = int(app.settings.lease_seconds * 1000)
    try:
        job = app.store.lease(message.job_id, message.epoch, owner=owner,
                              expires_at=now + lease_ms, now=now, actor=worker_id,
                              gate=message.gate,
                              code_version=app.settings.code_version)
    except Gated:
        return Outcome.GATED
    except StaleMessage as stale:
        current = stale.context.get("current")
        if isinstance(current, Job) and current.state is JobState.QUEUED and \
                current.epoch == message.epoch:
            for refused in app.refused_leases:  # not stale, refused: a start window
                refused(app, current, now)
        if isinstance(current, Job) and current.state is JobState.RUNNING and \
                current.epoch == message.epoch:
            return _running(app, current, delivery, now)
        if current is None:  # the lease's condition found no row
            return _no_row(app, message, delivery, now)
        return Outcome.STALE
    except NotFound:
        return _no_row(app, message, delivery, now)
    return job, owner, now


class HandedBack(LeaseholdError):
    """The message is kept (not acknowledged) and shows again shortly: its row is not put
    yet, or its job's lease still runs."""


def _hand_back(app: Leasehold, delivery: Delivery, seconds: float, why: str) -> HandedBack:
    if delivery.queue_url and delivery.receipt_handle:
        app.queues.extend(delivery.queue_url, delivery.receipt_handle,
                          max(1, math.ceil(seconds)))
    return HandedBack(why)


def _no_row(app: Leasehold, message: Message, delivery: Delivery, now: int) -> Outcome:
    """A message whose row is not there: sent first, its put may still be on its way (kept
    until :data:`handoff.ORPHAN_GRACE_MS` after it was sent); else stale (acknowledged):
    its put failed, or its process died before it, or the row was deleted."""
    if message.sent_at is None or now - message.sent_at >= handoff.ORPHAN_GRACE_MS:
        return Outcome.STALE
    left = (message.sent_at + handoff.ORPHAN_GRACE_MS - now) / 1000
    raise _hand_back(app, delivery, min(left, handoff.ORPHAN_RECHECK_SECONDS),
                     f"no row for {message.job_id} yet: kept for {left:.0f}s more")


def _running(app: Leasehold, job: Job, delivery: Delivery, now: int) -> Outcome:
    """A message of a RUNNING job's own epoch came back: its worker let it go visible (it
    died, or could not extend it). A job whose lease ran out (past the skew grace) is
    re-driven as the sweeper would, and the message acknowledged (the re-drive sends a new
    one); one whose lease still runs keeps the message until it ends. SQS is the sweeper of
    a job without a ``sweep`` entry (send-first, :mod:`.handoff`)."""
    cutoff = now - int(app.settings.skew_grace_seconds * 1000)
    expires = job.lease_expires_at or 0
    if expires >= cutoff:
        raise _hand_back(app, delivery, (expires - cutoff) / 1000,
                         f"{job.job_id} is running under a lease that has not run out")
    # A heartbeat, a finish or the sweeper that came first refuses it: done with, too.
    with contextlib.suppress(Conflict):
        sweeper.recover(app, job, now)
    return Outcome.STALE


def unstartable(app: Leasehold, job: Job, now: int) -> Outcome | JobError | None:
    """Why a leased job must not start, or None to run it: ``Outcome.CANCELLED`` (cancelled
    before its lease: the worker cancels it), a :class:`JobError` (past its deadline: the
    worker fails it, DEAD), or ``Outcome.LEASE_LOST`` (its lease ran out before it was
    granted: nothing is written)."""
    if job.cancel_requested:  # flagged before this lease: never start it
        return Outcome.CANCELLED
    deadline = job.extra.get(DEADLINE)
    if deadline is not None and now >= int(deadline):
        # The whole job's time is up (deadline_seconds): it ends DEAD, never retried.
        return deadline_exceeded(f"the job's deadline passed before attempt {job.attempt} started")
    if app.now() >= (job.lease_expires_at or now):
        # The lease landed after it had run out by our clock (a try that hung, retried):
        # the sweeper may be handing the job to another worker already. Never start it.
        log.warning("the lease of %s ran out before it was granted", job.job_id)
        return Outcome.LEASE_LOST
    return None


__all__ = ["MAX_EARLY_WAIT_SECONDS", "Delivery", "HandedBack", "Outcome", "lease", "unstartable",
           "worker_identity"]
