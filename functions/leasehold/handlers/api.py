"""Lambda entry point for the API (API Gateway REST proxy integration).

Importing this module is cheap on purpose (the cold start's import): the resolver (Powertools'
event handler, pydantic and every route's models) and the AWS clients are built by
:func:`prime`, on the first request, or before a SnapStart snapshot is taken (see
docs/operations.md). ``tests/unit/test_cold_start.py`` keeps pydantic out of the import.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from leasehold.handlers import telemetry

if TYPE_CHECKING:
    from leasehold.api.context import ApiConfig
    from leasehold.lifecycle.app import Leasehold

Handle = Callable[..., dict[str, Any]]


@cache
def _app() -> tuple[Leasehold, ApiConfig, Handle]:
    from leasehold.api.app import handle
    from leasehold.api.context import ApiConfig
    from leasehold.compose import compose

    return telemetry.install(compose()), ApiConfig.from_env(), handle


def prime() -> None:
    """Build the resolver and the app now (what the first request would otherwise do)."""
    _app()


@telemetry.instrumented
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    app, api_config, handle = _app()
    return handle(app, event, context, api_config)
