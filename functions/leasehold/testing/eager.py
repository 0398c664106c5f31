"""``run_task``: run a registered task here and now, as a worker would, without the runtime.

What carries over from the worker: the payload and the result go through the same JSON
encoding and size limits (a result over 64 KB raises ``PayloadTooLarge``, as it fails the
job), and a failure is retried per the task's ``max_attempts`` and :class:`RetryPolicy`
(``NonRetryableError`` and ``non_retryable`` names stop at once). What does not: there is no
lease, queue or timeout, and the back-off between attempts is not slept unless asked.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from leasehold.core.failures import describe
from leasehold.core.policy import decide_retry
from leasehold.core.registry import TaskRegistry, default_registry
from leasehold.core.schemas import check_input, task_input, task_output
from leasehold.core.spec import MAX_PAYLOAD_BYTES, MAX_RESULT_BYTES, encode_json
from leasehold.errors import PayloadTooLarge, ValidationError
from leasehold.testing.context import make_context


@dataclass
class Attempts:
    """What ``run_task`` did: each attempt's error (type, message) and the back-off after it."""

    errors: list[tuple[str, str]] = field(default_factory=list)
    delays: list[float] = field(default_factory=list)


def run_task(name: str, payload: Any = None, *, registry: TaskRegistry | None = None,
             max_attempts: int | None = None, tenant: str = "default",
             labels: dict[str, str] | None = None, sleep: Callable[[float], None] | None = None,
             attempts: Attempts | None = None) -> Any:
    """Run task ``name`` on ``payload`` and return its result as a client would read it.

    Raises the task's own exception once its attempts are used up (or at once for a
    non-retryable one), ``PayloadTooLarge`` for a payload or result over its limit, and
    ``ValidationError`` for an unknown task or a value that is not JSON (``InvalidInput``
    for a payload that does not fit a typed task's ``input=``; ``InvalidResult`` for a
    result that does not fit its ``output=``). ``attempts``
    collects each failure and back-off; ``sleep`` is called with each back-off (by default
    nothing sleeps).
    """
    definition = (registry or default_registry).get(name)
    limit = min(MAX_PAYLOAD_BYTES, definition.max_payload_bytes or MAX_PAYLOAD_BYTES)
    payload_json = encode_json("payload", payload, limit)
    check_input(definition.input, json.loads(payload_json))  # as a submission would
    tries = max_attempts or definition.max_attempts
    record = attempts if attempts is not None else Attempts()
    waited_ms = 0  # the back-offs so far: what max_retry_age_seconds measures
    for attempt in range(1, tries + 1):
        ctx = make_context(name, attempt=attempt, max_attempts=tries, tenant=tenant,
                           timeout_seconds=definition.timeout_seconds, labels=labels)
        try:
            result = task_output(definition.output, definition.fn(
                task_input(definition.input, json.loads(payload_json)), ctx))
        except Exception as exc:
            failure = describe(exc)
            record.errors.append((failure.type, failure.message))
            decision = decide_retry(definition.retry, attempt=attempt, max_attempts=tries,
                                    first_attempt_at_ms=0, now_ms=waited_ms,
                                    error_types=failure.types or (failure.type,))
            if not decision.retry:
                raise
            record.delays.append(decision.delay_seconds)
            waited_ms += int(decision.delay_seconds * 1000)
            if sleep is not None:
                sleep(decision.delay_seconds)
            continue
        try:
            return json.loads(encode_json("result", result, MAX_RESULT_BYTES))
        except (PayloadTooLarge, ValidationError) as exc:
            # As the worker: the job fails at once under this error's own name.
            record.errors.append((type(exc).__name__, f"the handler's result: {exc}"))
            raise
    raise AssertionError("unreachable")
