"""A submitted job, from application code: its state now, and its result when it finishes."""

from __future__ import annotations

import time
from typing import Any, Protocol

from leasehold.client.errors import ApiError, Cancelled, Expired, JobFailed, ResultTimeout


class Jobs(Protocol):
    """What a handle needs of its client."""

    def get(self, job_id: str, *, wait_seconds: float = 0) -> dict[str, Any]: ...
    def cancel(self, job_id: str) -> dict[str, Any]: ...
    def pause_job(self, job_id: str) -> dict[str, Any]: ...
    def resume_job(self, job_id: str) -> dict[str, Any]: ...
    def reset_job(self, job_id: str, from_step: str) -> dict[str, Any]: ...


TERMINAL = frozenset({"SUCCEEDED", "DEAD", "CANCELLED", "EXPIRED"})
#: States in which a job may still finish; any other (one a newer API adds) ends the wait.
#: A durable job's SLEEPING is one: ``result()`` waits across its sleeps and callbacks.
LIVE = frozenset({"SCHEDULED", "WAITING", "QUEUED", "RUNNING", "SLEEPING"})
#: A handle made from an id alone, before it has read the job.
NOT_READ = "UNKNOWN"
#: The longest one long poll asks the API to hold (API Gateway answers within 29 s).
MAX_WAIT_SECONDS = 20.0


def state_of(job: dict[str, Any]) -> str:
    """The job's state, or :class:`ApiError` for an answer that has none."""
    state = job.get("state") if isinstance(job, dict) else None
    if not isinstance(state, str):
        raise ApiError(0, "not_a_job", f"the API answered a job without a state: {job!r}"[:300])
    return state


def outcome(job: dict[str, Any]) -> Any:
    """The result of a finished job, or its end as an exception."""
    state = state_of(job)
    if state == "SUCCEEDED":
        return job.get("result")
    if state == "CANCELLED":
        raise Cancelled(job)
    if state == "EXPIRED":
        raise Expired(job)
    if state == "DEAD":
        raise JobFailed(job)
    raise ApiError(0, "unknown_state", f"job {job.get('job_id')} is in state {state!r}, which "
                                       "this client does not know: it stopped waiting (is "
                                       "the client older than the API?)")


class JobHandle:
    """One job: ``status()`` reads its state, ``result()`` waits for its end.

    Waiting is a series of long polls (``GET /jobs/{id}?wait_seconds=N``): the API answers as
    soon as the job is finished, so ``result()`` returns promptly and costs one request per
    20 s of waiting.
    """

    def __init__(self, client: Jobs, job_id: str, job: dict[str, Any] | None = None, *,
                 created: bool = True) -> None:
        self.client = client
        self.job_id = job_id
        #: False when a submit was answered with an earlier job (same idempotency key).
        self.created = created
        #: The job as the API last showed it (the submit's answer at first).
        self.job: dict[str, Any] = job or {"job_id": job_id, "state": NOT_READ}

    def __repr__(self) -> str:
        return f"JobHandle({self.job_id!r}, state={self.job.get('state')!r})"

    def refresh(self, wait_seconds: float = 0) -> dict[str, Any]:
        self.job = self.client.get(self.job_id, wait_seconds=wait_seconds)
        return self.job

    def status(self) -> str:
        """The job's state now: QUEUED, RUNNING, SUCCEEDED, DEAD, CANCELLED, ..."""
        return state_of(self.refresh())

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the job to finish and return its result.

        Raises :class:`JobFailed` (the job's error and remote traceback) if it ended DEAD,
        :class:`Cancelled` if it was cancelled, :class:`ResultTimeout` (a ``TimeoutError``)
        if it is still going after ``timeout`` seconds (None: wait as long as it takes), and
        :class:`ApiError` for a state this client does not know (it never waits on one).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        job = self.refresh() if self.job.get("state") == NOT_READ else self.job
        read = self.job.get("state") == NOT_READ
        while state_of(job) in LIVE:
            left = MAX_WAIT_SECONDS if deadline is None else deadline - time.monotonic()
            if left <= 0 and read:
                raise ResultTimeout(job, timeout or 0.0)
            # The job as this handle last saw it is live: ask once more, even with no time
            # left (``timeout=0`` asks whether it has finished by now).
            read = True
            asked = max(0.0, min(left, MAX_WAIT_SECONDS))
            started = time.monotonic()
            job = self.refresh(wait_seconds=asked)
            if state_of(job) in LIVE and time.monotonic() - started < asked / 2:
                # An API that does not hold its answer (one older than the long poll): poll
                # gently rather than in a tight loop.
                time.sleep(min(0.5, asked))
        return outcome(job)

    def cancel(self) -> dict[str, Any]:
        self.job = self.client.cancel(self.job_id)
        return self.job

    def pause(self) -> dict[str, Any]:
        self.job = self.client.pause_job(self.job_id)
        return self.job

    def resume(self) -> dict[str, Any]:
        self.job = self.client.resume_job(self.job_id)
        return self.job

    def reset(self, from_step: str) -> dict[str, Any]:
        self.job = self.client.reset_job(self.job_id, from_step)
        return self.job
