"""Lambda entry point for the worker: an SQS event source with partial batch responses."""

from __future__ import annotations

from functools import cache
from typing import Any

from leasehold.aws import secrets
from leasehold.compose import compose
from leasehold.handlers import telemetry
from leasehold.lifecycle.consumer import process_event
from leasehold.lifecycle.worker import Worker


@cache
def _worker() -> Worker:
    return Worker(telemetry.install(compose()))


@telemetry.instrumented
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # The pool's secrets reach os.environ before the task modules are imported (compose),
    # and are read again once their cache expires (a rotated secret).
    secrets.apply()
    return process_event(_worker(), event, context)
