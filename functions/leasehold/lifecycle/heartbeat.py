"""One attempt's heartbeat: its lease extended while the handler runs, by the worker's clock.

The attempt knows when its lease ends on its own clock (the app's): the lease it took, pushed
out by each heartbeat that answered. A heartbeat is waited for only until then
(:func:`~leasehold.lifecycle.deadline.call_before`), so a call hung on its socket cannot keep
the handler running past the sweeper's cutoff (lease end + skew grace): at the lease's end the
handler is told to stop and the attempt gives up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from leasehold.core.context import JobContext
from leasehold.core.jobs import Job, JobError
from leasehold.core.spec import encode_json
from leasehold.errors import LeaseLost
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.deadline import Overdue, call_before

log = logging.getLogger(__name__)


@dataclass
class Attempt:
    """What happened while the handler ran."""

    result: Any = None
    failure: BaseException | None = None
    finished: bool = False
    lease_lost: bool = False
    timed_out: bool = False
    #: Stopped at the job's deadline (``deadline_seconds``), before its own timeout.
    past_deadline: bool = False
    #: When the lease ends unless a heartbeat extends it (epoch ms, the app's clock).
    lease_ends: int = 0
    #: Heartbeats that failed in a row (throttled, unreachable): retried within the lease.
    failed_beats: int = 0
    #: The row as the last heartbeat saw it (``None``: as leased).
    view: Job | None = None
    #: ``ctx.transact`` entries: written with the success transition only.
    effects: list[dict[str, Any]] = field(default_factory=list)
    #: A failure reported as data rather than raised (a remote worker's ``fail``).
    error: JobError | None = None


def extend(app: Leasehold, job: Job, owner: str, ends: int, progress: Any = None) -> Job:
    """One heartbeat's write: the lease of ``owner`` (fenced) now ends at ``ends``, with
    the progress reported; the row as it is after it. Raises :class:`LeaseLost` when the lease
    was taken over or the job ended. Every worker's heartbeat, in-process or over HTTP."""
    sets: dict[str, Any] = {"lease_expires_at": ends}
    if progress is not None:
        sets["progress"] = encode_json("progress", progress, 16 * 1024)
    return app.store.update_running(job, owner=owner, set=sets, conflict=LeaseLost)


class Heartbeat:
    """Called by the worker's loop every :attr:`interval`, and by the handler
    (``ctx.heartbeat``): extends the lease, and the message's invisibility after it."""

    def __init__(self, app: Leasehold, job: Job, owner: str, ctx: JobContext,
                 attempt: Attempt, keep_invisible: Callable[[], None] | None) -> None:
        self.app = app
        self.job = job
        self.owner = owner
        self.ctx = ctx
        self.attempt = attempt
        self.keep_invisible = keep_invisible
        #: The latest view of the row, replaced by each heartbeat.
        self.view = job
        self.interval = max(0.05, app.settings.lease_seconds / 3)
        self._lease_ms = int(app.settings.lease_seconds * 1000)
        self._lock = threading.Lock()

    def __call__(self, progress: Any = None) -> None:
        app, state = self.app, self.attempt
        with self._lock:
            if state.lease_lost:
                return
            ends = app.now() + self._lease_ms
            current = self.view
            try:
                # Waited for only while the lease lasts by our clock: a call hung on its
                # socket (botocore would wait 30 s a try, 9 tries) must not keep the handler
                # running past the sweeper's cutoff (lease + skew grace).
                self.view = call_before(
                    app.clock, state.lease_ends,
                    lambda: extend(app, current, self.owner, ends, progress),
                    name=f"heartbeat-{self.job.job_id}")
            except LeaseLost:
                self._lose()
                return
            except Overdue:
                log.warning("the lease of %s ran out by this worker's clock before its "
                            "heartbeat answered: the attempt gives up", self.job.job_id)
                self._lose()
                return
            except Exception:
                # Throttled past botocore's retries, or DynamoDB unreachable: the lease still
                # holds until it ends, so keep the attempt and try again soon. Only a lease
                # that really ran out stops the handler (the sweeper takes over).
                state.failed_beats += 1
                log.warning("heartbeat of %s failed (%d in a row)", self.job.job_id,
                            state.failed_beats, exc_info=True)
                if app.now() >= state.lease_ends:
                    self._lose()
                return
            state.failed_beats = 0
            state.lease_ends = ends
            if self.view.cancel_requested:
                self.ctx.cancel("cancel requested")
        if self.keep_invisible is not None:
            try:
                # Bounded too, by the next heartbeat.
                call_before(app.clock, app.now() + int(self.interval * 1000),
                            self.keep_invisible, name=f"visibility-{self.job.job_id}")
            except Exception:  # the lease in DynamoDB is what counts; SQS may redeliver
                log.info("could not extend visibility of %s", self.job.job_id, exc_info=True)

    def _lose(self) -> None:
        self.attempt.lease_lost = True
        self.ctx.cancel("lease lost")
