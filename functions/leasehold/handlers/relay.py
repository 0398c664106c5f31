"""Lambda entry point for the change-stream relay (a DynamoDB Streams event source mapping on
the jobs table, with ReportBatchItemFailures)."""

from __future__ import annotations

from functools import cache, partial
from typing import Any

from leasehold.compose import compose
from leasehold.events.publishing import FileSink, Sink, sink_for
from leasehold.handlers import telemetry
from leasehold.lifecycle.app import Leasehold
from leasehold.streams.relay import relay
from leasehold.streams.removals import after_commit


@cache
def _app() -> Leasehold:
    return telemetry.install(compose())


@cache
def _sink() -> Sink:
    # No bus configured: the events have nowhere to go, and the records are done.
    return sink_for(_app()) or FileSink("/dev/null")


@telemetry.instrumented
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    app = _app()
    failed = relay(event.get("Records", []), _sink(), app.settings.publish, app.now,
                   hand_off=partial(after_commit, app))
    return {"batchItemFailures": [{"itemIdentifier": number} for number in failed]}
