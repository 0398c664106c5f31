"""Lambda entry point for the sweeper (EventBridge rate(1 minute))."""

from __future__ import annotations

from dataclasses import asdict
from functools import cache
from typing import Any

from leasehold.compose import compose
from leasehold.handlers import telemetry
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.sweeper import sweep


@cache
def _app() -> Leasehold:
    return telemetry.install(compose())


@telemetry.instrumented
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    report = asdict(sweep(_app()))
    report.pop("job_ids")
    return report
