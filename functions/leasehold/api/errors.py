"""The one place that maps errors to HTTP: ``{"error": {"code", "message", "field"}}``.

One rule for every route: 400 when the request cannot be read (not JSON, not UTF-8, a lone
surrogate, a cursor this API did not issue), 401 no identity, 404 not found (also an unknown
route), 405 a known path with another method (with ``Allow``), 409 conflicts, 413 too large,
422 a readable request with an invalid value (wrong JSON type, unknown field or task, bad
cron, a cycle), 429 rate or live-job limit (Retry-After), 503 overloaded (Retry-After).

``field`` names the value with one syntax everywhere: object keys joined by dots, list
items by index in brackets (``steps[0].task``, ``labels.env``, ``state[1]``).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from leasehold.api.context import Forbidden, Unauthenticated
from leasehold.api.models import TEXT
from leasehold.errors import (
    Conflict,
    Fenced,
    LeaseholdError,
    LeaseLost,
    Misdirected,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    RateLimited,
    ValidationError,
)

log = logging.getLogger(__name__)


class BadRequest(LeaseholdError):
    """The request cannot be read."""

    code = "bad_request"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class BodyTooLarge(BadRequest):
    """The request body is too large."""

    code = "payload_too_large"


#: The header a ``421 Misdirected`` answer names the tenant's home cell's API in.
HOME_URL_HEADER = "Leasehold-Home-Url"


def error_response(status: int, code: str, message: str, field: str | None = None,
                   headers: dict[str, str] | None = None,
                   extra: Mapping[str, Any] | None = None) -> Response:
    body = {"error": {"code": code, "message": message, "field": field, **(extra or {})}}
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON,
                    body=json.dumps(body), headers=headers or {})


def _status(exc: LeaseholdError) -> int:
    # Most specific first: PayloadTooLarge is a ValidationError, Overloaded a RateLimited.
    for kind, status in ((BodyTooLarge, 413), (BadRequest, 400), (Unauthenticated, 401),
                         (Forbidden, 403),
                         (PayloadTooLarge, 413), (ValidationError, 422), (NotFound, 404),
                         (Conflict, 409), (LeaseLost, 409), (Overloaded, 503), (RateLimited, 429),
                         (Misdirected, 421), (Fenced, 503)):
        if isinstance(exc, kind):
            return status
    return 500


def described(exc: LeaseholdError) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The status, the ``error`` object and the headers ``exc`` is answered with (a batch
    answers each item's own error with the same three)."""
    status = _status(exc)
    if status == 500:
        log.exception("unexpected domain error", exc_info=exc)
        return 500, {"code": "internal", "message": "internal error", "field": None}, {}
    headers = {}
    if isinstance(exc, RateLimited):
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    if isinstance(exc, Fenced):
        headers["Retry-After"] = "5"
    answer = {"code": exc.code, "message": str(exc), "field": getattr(exc, "field", None)}
    if isinstance(exc, Misdirected):
        # Where to submit instead: the tenant's home Region and its cell's API.
        answer.update(home=exc.home, home_url=exc.url)
        if exc.url:
            headers[HOME_URL_HEADER] = exc.url
    return status, answer, headers


def from_domain(exc: LeaseholdError) -> Response:
    status, error, headers = described(exc)
    extra = {key: value for key, value in error.items()
             if key not in ("code", "message", "field")}
    return error_response(status, error["code"], error["message"], error["field"], headers,
                          extra)


def field_path(parts: Iterable[str | int]) -> str | None:
    """``("steps", 0, "task")`` -> ``steps[0].task``: the one field syntax of every answer."""
    path = ""
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or None


def _field(loc: Any) -> str | None:
    # pydantic names a dict's key as "[key]" after it: the key itself is the field.
    return field_path(p for p in (loc or ())
                      if p not in ("body", "query", "path", "header", "[key]"))


def invalid(errors: Sequence[Mapping[str, Any]]) -> tuple[int, dict[str, Any]]:
    """The status and ``error`` object for pydantic's ``errors`` (the first one names the
    field): 400 for a body that is not JSON or not an object, else 422."""
    if any(e.get("type") == "json_invalid" for e in errors):
        return 400, {"code": "bad_request", "message": "the body is not valid JSON",
                     "field": None}
    first = errors[0] if errors else {}
    field = _field(first.get("loc"))
    message = str(first.get("msg", "invalid request"))
    if first.get("type") == "string_pattern_mismatch" and \
            (first.get("ctx") or {}).get("pattern") == TEXT:
        message = "must not contain control characters"  # clearer than the pattern
    if first.get("type") == "missing" and field is None:
        return 400, {"code": "bad_request", "message": "a JSON object body is required",
                     "field": None}
    return 422, {"code": "validation_error",
                 "message": f"{field}: {message}" if field else message, "field": field}


def from_validation(exc: RequestValidationError) -> Response:
    status, error = invalid(list(exc.errors()))
    return error_response(status, error["code"], error["message"], error["field"])


def install(resolver: APIGatewayRestResolver) -> None:
    """Register the handlers on the resolver; every route's errors come through here."""

    @resolver.exception_handler(LeaseholdError)
    def _domain(exc: LeaseholdError) -> Response:
        return from_domain(exc)

    @resolver.exception_handler(RequestValidationError)
    def _validation(exc: RequestValidationError) -> Response:
        return from_validation(exc)

    allowed = _allowed_methods(resolver)

    @resolver.not_found
    def _not_found(exc: NotFoundError) -> Response:
        event = resolver.current_event
        methods = allowed(event.path)
        if methods:
            return error_response(
                405, "method_not_allowed",
                f"{event.http_method} is not allowed on {event.path}; use {', '.join(methods)}",
                headers={"Allow": ", ".join(methods)})
        return error_response(404, "not_found", "no such route")

    @resolver.exception_handler(Exception)
    def _unexpected(exc: Exception) -> Response:
        log.exception("unhandled error", exc_info=exc)
        return error_response(500, "internal", "internal error")


def _allowed_methods(resolver: APIGatewayRestResolver) -> Callable[[str], list[str]]:
    """The methods a path answers. Read from the resolver's own route table (the routes it
    matched against), so routes left out of the OpenAPI document count too; if Powertools
    ever renames that table, paths fall back to a plain 404 (the 405 tests fail first)."""

    def allowed(path: str) -> list[str]:
        routes = [*getattr(resolver, "_static_routes", ()),
                  *getattr(resolver, "_dynamic_routes", ())]
        return sorted({route.method for route in routes if route.rule.match(path)})

    return allowed
