"""Lambda entry point for event triggers: an EventBridge rule delivers events here.

The rule may match broadly (e.g. every event on the bus but Leasehold's own job events);
:func:`leasehold.events.triggers.dispatch` applies each trigger's own pattern.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from leasehold.compose import compose
from leasehold.events import triggers
from leasehold.handlers import telemetry
from leasehold.lifecycle.app import Leasehold


@cache
def _app() -> Leasehold:
    return telemetry.install(compose())


@telemetry.instrumented
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    jobs = triggers.dispatch(_app(), event)
    return {"submitted": [job.job_id for job in jobs]}
