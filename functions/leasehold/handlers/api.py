"""Lambda entry point for the API (API Gateway REST proxy integration)."""

from __future__ import annotations

from functools import cache
from typing import Any

from leasehold.api.app import handle
from leasehold.api.context import ApiConfig
from leasehold.compose import compose
from leasehold.handlers import telemetry
from leasehold.lifecycle.app import Leasehold


@cache
def _app() -> tuple[Leasehold, ApiConfig]:
    return telemetry.install(compose()), ApiConfig.from_env()


@telemetry.instrumented
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    app, api_config = _app()
    return handle(app, event, context, api_config)
