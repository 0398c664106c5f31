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
    """Build the resolver and the app now (what the first request would otherwise do).

    Builds no AWS client (they are made on first use), so a snapshot taken after it holds
    no credentials and no connection."""
    _app()


def after_restore() -> None:
    """A SnapStart restore resumes every environment from one memory image: re-seed the app's
    ``random.Random`` (retry jitter) so they do not all draw the same numbers. Ids come
    from ``secrets`` (the kernel), which a snapshot does not freeze."""
    if _app.cache_info().currsize:
        _app()[0].rng.seed()


try:  # Lambda's managed Python runtimes ship this; it runs the hooks only under SnapStart.
    from snapshot_restore_py import (
        register_after_restore,
        register_before_snapshot,
    )
except ImportError:  # tests, the local runtime
    pass
else:
    register_before_snapshot(prime)
    register_after_restore(after_restore)


@telemetry.instrumented
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    app, api_config, handle = _app()
    return handle(app, event, context, api_config)
