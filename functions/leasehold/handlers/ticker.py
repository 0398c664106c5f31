"""Lambda entry point for the ticker (EventBridge rate(1 minute)).

No leader lease here: EventBridge starts one invocation a minute, and even two overlapping
ones are harmless because every step of a tick is idempotent.
"""

from __future__ import annotations

from dataclasses import asdict
from functools import cache
from typing import Any

from leasehold.compose import compose
from leasehold.handlers import telemetry
from leasehold.lifecycle.app import Leasehold
from leasehold.time.ticker import tick


@cache
def _app() -> Leasehold:
    return telemetry.install(compose())


@telemetry.instrumented
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    report = asdict(tick(_app()))
    report.pop("job_ids")
    report.pop("fired_job_ids")
    return report
