"""What a task handler sees while it runs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(kw_only=True)
class JobContext:
    job_id: str
    task: str
    tenant: str
    attempt: int
    max_attempts: int
    #: The job's epoch: strictly grows with each hand-off. Pass it to systems that can refuse
    #: writes from an older token, so a zombie worker cannot clobber a newer one.
    fencing_token: int
    #: Stable across attempts of the same job: use it to make side effects idempotent.
    idempotency_key: str
    #: When this attempt times out, as UTC epoch milliseconds.
    deadline_ms: int
    labels: Mapping[str, str] = field(default_factory=dict)
    #: Other features' data for the handler (a workflow step's dependency results, ...).
    extra: Mapping[str, Any] = field(default_factory=dict)
    _cancelled: threading.Event = field(default_factory=threading.Event, repr=False)
    _cancel_reason: str = ""
    _heartbeat: Callable[[Any], None] | None = field(default=None, repr=False)

    @property
    def cancelled(self) -> bool:
        """True once the job was cancelled, its lease lost, or its attempt timed out."""
        return self._cancelled.is_set()

    @property
    def cancel_reason(self) -> str:
        return self._cancel_reason

    def wait_cancelled(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds, waking early (True) if the job is cancelled."""
        return self._cancelled.wait(timeout)

    def heartbeat(self, progress: Any = None) -> None:
        """Extend the lease now and record ``progress`` (any JSON value) on the job."""
        if self._heartbeat is not None:
            self._heartbeat(progress)

    def cancel(self, reason: str) -> None:
        if not self._cancelled.is_set():
            self._cancel_reason = reason
            self._cancelled.set()
