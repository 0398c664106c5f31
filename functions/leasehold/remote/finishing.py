"""A remote worker's heartbeat and fenced finishes (``/jobs/{id}/heartbeat|complete|fail``).

Each reads the row and checks the token against its lease owner first (a zombie learns of
it without a write), then writes through the lifecycle's own code, conditioned on the same
owner: a lease taken over between the read and the write still refuses it. A finish repeated
with the token of the lease it finished answers the job as it is: the first one's response
was lost, and nothing is written twice.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from leasehold.core.failures import unfit_result
from leasehold.core.jobs import Job, JobError
from leasehold.core.spec import MAX_RESULT_BYTES, encode_json
from leasehold.core.states import JobState
from leasehold.errors import LeaseLost, PayloadTooLarge
from leasehold.lifecycle import fleet
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.heartbeat import Attempt, extend
from leasehold.lifecycle.submission import DEADLINE
from leasehold.lifecycle.worker import Outcome, Worker
from leasehold.remote.tokens import Token

log = logging.getLogger(__name__)

#: The error type that makes a reported failure final whatever the retry policy says.
NON_RETRYABLE = "NonRetryableError"
#: Which lease wrote the finish of a remote worker's attempt (:func:`finisher`), set on the
#: write that ends it (success, retry, burial, cancel) and on no other.
FINISHED_BY = "finished_by"


@dataclass(frozen=True)
class Beat:
    expires_at: int
    cancel_requested: bool


def deadline_of(job: Job) -> int | None:
    """The job's deadline (``deadline_seconds``), epoch ms; None without one."""
    deadline = job.extra.get(DEADLINE)
    return None if deadline is None else int(deadline)


def timeout_of(job: Job) -> int | None:
    """When the leased attempt must have ended, epoch ms: its start plus the task's
    ``timeout_seconds``, or the job's deadline if that comes first (as a Python worker's
    attempt is cut at ``min(timeout, deadline)``)."""
    ends = None if job.started_at is None else \
        job.started_at + int(job.timeout_seconds * 1000)
    deadline = deadline_of(job)
    candidates = [t for t in (ends, deadline) if t is not None]
    return min(candidates) if candidates else None


def worker_of(token: str) -> str:
    """The worker id a lease's owner was made from (``Worker.take``: ``worker_id:hex``)."""
    return token.rpartition(":")[0] or token


def finisher(owner: str) -> str:
    """What a finish records of the lease that wrote it (:data:`FINISHED_BY`): the lease
    secret of its owner (``worker_id:hex``), 8 characters on the row."""
    return owner.rpartition(":")[2]


def finished_by_this_lease(job: Job, owner: str) -> bool:
    """Whether the write that ended ``owner``'s attempt is on the row: what a repeated
    finish is answered from, never the owner field (the sweeper ends a job without
    clearing it, and a zombie must not be told its result was taken)."""
    return job.extra.get(FINISHED_BY) == finisher(owner)


@contextmanager
def _ends_the_lease(app: Leasehold, job_id: str, token_text: str, *,
                    on_return: bool) -> Iterator[None]:
    """The worker of ``token_text`` no longer holds the job once it is told its lease is
    over (409), or its finish is answered (``on_return``: a finish's 413 too, the attempt
    ended ``PayloadTooLarge``): off its jobs in hand (``GET /workers``), best effort. A
    heartbeat's 413 (its progress too large) ends nothing."""
    ends: tuple[type[Exception], ...] = (LeaseLost, PayloadTooLarge) if on_return else \
        (LeaseLost,)
    try:
        yield
    except ends:
        _release(app, job_id, token_text)
        raise
    if on_return:
        _release(app, job_id, token_text)


def _release(app: Leasehold, job_id: str, token_text: str) -> None:
    try:
        owner = Token.decode(token_text, job_id).owner
    except LeaseLost:
        return  # not a token: no worker to speak of
    try:
        fleet.released(app, worker_id=worker_of(owner), job_id=job_id)
    except Exception:  # the view only: never a reason to fail the answer
        log.info("could not record that %s no longer holds %s", worker_of(owner), job_id,
                 exc_info=True)


def heartbeat(app: Leasehold, job_id: str, token_text: str, progress: Any = None) -> Beat:
    """Extend the lease (never past the attempt's timeout); or end the attempt and say so:
    CANCELLED once a cancel was requested (the worker stops and need report nothing), or
    ``AttemptTimeout`` past its timeout (409, the worker stops)."""
    with _ends_the_lease(app, job_id, token_text, on_return=False):
        beat = _heartbeat(app, job_id, token_text, progress)
    if beat.cancel_requested:
        _release(app, job_id, token_text)
    return beat


def _heartbeat(app: Leasehold, job_id: str, token_text: str, progress: Any) -> Beat:
    job = app.store.get(job_id)  # an unknown job is 404, whatever the token
    token = Token.decode(token_text, job_id)
    if job.state is JobState.CANCELLED and finished_by_this_lease(job, token.owner):
        return Beat(expires_at=job.finished_at or app.now(), cancel_requested=True)  # again
    if job.state is not JobState.RUNNING or job.lease_owner != token.owner:
        raise LeaseLost(job_id=job_id, current=job)
    if job.cancel_requested:
        return _cancelled(app, job, token)
    now = app.now()
    _refuse_past_timeout(app, job, token, now)
    ends = now + int(app.settings.lease_seconds * 1000)
    timeout = timeout_of(job)
    if timeout is not None:
        # The worker heartbeats at a third of what is left: near its timeout it comes back
        # soon enough to hear of it.
        ends = min(ends, max(timeout, now + 1))
    view = extend(app, job, token.owner, ends, progress)
    if view.cancel_requested:
        return _cancelled(app, view, token)
    url = token.queue_of(app, job.pool)
    if url is not None:
        try:  # as a Python worker's heartbeat: the lease in DynamoDB is what counts
            app.queues.extend(url, token.receipt_handle,
                              int(app.settings.lease_seconds * 2) + 1)
        except Exception:
            log.info("could not extend the visibility of %s", job_id, exc_info=True)
    return Beat(expires_at=ends, cancel_requested=False)


def _cancelled(app: Leasehold, job: Job, token: Token) -> Beat:
    """A heartbeat met a cancel request: the job ends CANCELLED now, written as this lease's
    finish (fenced on its owner), whether the worker then reports its end or not."""
    ended = _record(app, job, token, Attempt(finished=True, view=job))
    return Beat(expires_at=ended.finished_at or app.now(), cancel_requested=True)


def _refuse_past_timeout(app: Leasehold, job: Job, token: Token, now: int) -> None:
    """Past the attempt's timeout: record its end (``AttemptTimeout`` by the retry policy,
    or ``DeadlineExceeded`` at the job's deadline, as a Python worker's attempt ends) and
    refuse the request (409 lease_lost, saying why)."""
    timeout = timeout_of(job)
    if timeout is None or now < timeout:
        return
    deadline = deadline_of(job)
    past_deadline = deadline is not None and deadline <= timeout
    ended = _record(app, job, token, Attempt(finished=True, timed_out=True,
                                             past_deadline=past_deadline))
    why = "the job's deadline" if past_deadline else \
        f"its timeout of {job.timeout_seconds:g}s"
    kind = ended.error.type if ended.error is not None else "AttemptTimeout"
    raise LeaseLost(f"attempt {job.attempt} of job {job.job_id} ran past {why}: it ended "
                    f"{kind} ({ended.state}); stop it and report nothing",
                    job_id=job.job_id, current=ended)


def complete(app: Leasehold, job_id: str, token: str, result: Any) -> Job:
    """Record the attempt's result. One over :data:`MAX_RESULT_BYTES` ends the attempt
    ``PayloadTooLarge`` (never retried: every attempt would return it again), and is then
    refused (413) so the worker knows its result was not kept."""
    with _ends_the_lease(app, job_id, token, on_return=True):
        try:
            encode_json("result", result, MAX_RESULT_BYTES)
        except PayloadTooLarge as exc:
            _finish(app, job_id, token, Attempt(error=unfit_result(exc), finished=True))
            raise
        return _finish(app, job_id, token, Attempt(result=result, finished=True))


def fail(app: Leasehold, job_id: str, token: str, *, error_type: str, message: str,
         retryable: bool = True) -> Job:
    # A result the worker could not send (over the limits: 413) is as final as one the
    # server refused: however it arrives, PayloadTooLarge is never retried.
    retryable = retryable and error_type != PayloadTooLarge.__name__
    types = (error_type,) if retryable else (error_type, NON_RETRYABLE)
    with _ends_the_lease(app, job_id, token, on_return=True):
        return _finish(app, job_id, token, Attempt(
            error=JobError(type=error_type, message=message, types=types), finished=True))


def _finish(app: Leasehold, job_id: str, token_text: str, attempt: Attempt) -> Job:
    """A worker's report of its attempt's end: recorded once, answered again."""
    job = app.store.get(job_id)
    token = Token.decode(token_text, job_id)
    if job.state is not JobState.RUNNING or job.lease_owner != token.owner:
        if finished_by_this_lease(job, token.owner):
            _acknowledge(app, job, token)
            return job  # this lease's finish was recorded: a retry after a lost response
        raise LeaseLost(job_id=job_id, current=job)
    # A report past the attempt's timeout comes too late, as a Python worker's handler
    # that returned after it: the attempt ends AttemptTimeout.
    _refuse_past_timeout(app, job, token, app.now())
    return _record(app, job, token, attempt)


def _record(app: Leasehold, job: Job, token: Token, attempt: Attempt) -> Job:
    """Write the end of ``token``'s attempt of ``job`` (RUNNING, its lease) through the
    lifecycle's own finish, marked as this lease's; the row after it."""
    attempt.lease_ends = job.lease_expires_at or app.now()
    worker = Worker(app, worker_id=worker_of(token.owner),
                    finish_marks={FINISHED_BY: finisher(token.owner)})
    outcome = worker.record(job, token.owner, attempt)
    after = app.store.get(job.job_id)
    if outcome is Outcome.LEASE_LOST or (outcome is Outcome.CANCELLED and
                                         not finished_by_this_lease(after, token.owner)):
        # Lost, or ended meanwhile by the sweeper (a cancel honoured on a lost lease): this
        # lease wrote nothing. (The row may have moved on since our write: a retry leased.)
        raise LeaseLost(job_id=job.job_id, current=after)
    _acknowledge(app, job, token)
    return after


def _acknowledge(app: Leasehold, job: Job, token: Token) -> None:
    """The attempt's outcome is written: its message goes, as a Python worker deletes it
    (if this fails it shows again later, and its stale epoch starts nothing)."""
    url = token.queue_of(app, job.pool)
    if url is None:
        return
    try:
        app.queues.delete(url, [token.receipt_handle])
    except Exception:
        log.info("could not delete the message of %s", job.job_id, exc_info=True)


__all__ = ["FINISHED_BY", "NON_RETRYABLE", "Beat", "complete", "deadline_of", "fail",
           "finished_by_this_lease", "finisher", "heartbeat", "timeout_of", "worker_of"]
