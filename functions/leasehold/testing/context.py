"""``make_context``: the :class:`~leasehold.JobContext` a handler gets, for calling it
directly in a unit test."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from leasehold.core.context import JobContext


def make_context(task: str = "test", *, job_id: str | None = None, tenant: str = "default",
                 attempt: int = 1, max_attempts: int = 5, fencing_token: int = 1,
                 idempotency_key: str | None = None, timeout_seconds: float = 300.0,
                 labels: Mapping[str, str] | None = None, extra: Mapping[str, Any] | None = None,
                 heartbeats: list[Any] | None = None,
                 on_heartbeat: Callable[[Any], None] | None = None) -> JobContext:
    """A context as the worker builds it, every field defaulted.

    ``heartbeats``: a list that receives each ``ctx.heartbeat(progress)`` (or give
    ``on_heartbeat``). ``ctx.cancel("why")`` sets ``ctx.cancelled``, as a cancel would.
    """
    job_id = job_id or uuid.uuid4().hex.upper()[:26]
    beat = on_heartbeat or (heartbeats.append if heartbeats is not None else None)
    return JobContext(
        job_id=job_id, task=task, tenant=tenant, attempt=attempt, max_attempts=max_attempts,
        fencing_token=fencing_token, idempotency_key=idempotency_key or job_id,
        deadline_ms=time.time_ns() // 1_000_000 + int(timeout_seconds * 1000),
        labels=dict(labels or {}), extra=dict(extra or {}), _heartbeat=beat)
