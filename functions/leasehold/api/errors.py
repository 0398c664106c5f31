"""The one place that maps errors to HTTP: ``{"error": {"code", "message", "field"}}``.

400 unreadable request, 401 no identity, 404 not found, 409 conflicts, 413 too large,
422 invalid values, 429 rate or live-job limit (Retry-After), 503 overloaded (Retry-After).
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError

from leasehold.api.context import Unauthenticated
from leasehold.errors import (
    Conflict,
    LeaseholdError,
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


def error_response(status: int, code: str, message: str, field: str | None = None,
                   headers: dict[str, str] | None = None) -> Response:
    body = {"error": {"code": code, "message": message, "field": field}}
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON,
                    body=json.dumps(body), headers=headers or {})


def _status(exc: LeaseholdError) -> int:
    # Most specific first: PayloadTooLarge is a ValidationError, Overloaded a RateLimited.
    for kind, status in ((BodyTooLarge, 413), (BadRequest, 400), (Unauthenticated, 401),
                         (PayloadTooLarge, 413), (ValidationError, 422), (NotFound, 404),
                         (Conflict, 409), (Overloaded, 503), (RateLimited, 429)):
        if isinstance(exc, kind):
            return status
    return 500


def from_domain(exc: LeaseholdError) -> Response:
    status = _status(exc)
    if status == 500:
        log.exception("unexpected domain error", exc_info=exc)
        return error_response(500, "internal", "internal error")
    headers = {}
    if isinstance(exc, RateLimited):
        headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after)))
    return error_response(status, exc.code, str(exc), getattr(exc, "field", None), headers)


def _field(loc: Any) -> str | None:
    parts = [str(p) for p in (loc or ()) if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or None


def from_validation(exc: RequestValidationError) -> Response:
    errors = list(exc.errors())
    if any(e.get("type") == "json_invalid" for e in errors):
        return error_response(400, "bad_request", "the body is not valid JSON")
    first = errors[0] if errors else {}
    field = _field(first.get("loc"))
    message = str(first.get("msg", "invalid request"))
    if first.get("type") == "missing" and field is None:
        return error_response(400, "bad_request", "a JSON object body is required")
    return error_response(422, "validation_error", f"{field}: {message}" if field else message,
                          field)


def install(resolver: APIGatewayRestResolver) -> None:
    """Register the handlers on the resolver; every route's errors come through here."""

    @resolver.exception_handler(LeaseholdError)
    def _domain(exc: LeaseholdError) -> Response:
        return from_domain(exc)

    @resolver.exception_handler(RequestValidationError)
    def _validation(exc: RequestValidationError) -> Response:
        return from_validation(exc)

    @resolver.not_found
    def _not_found(exc: NotFoundError) -> Response:
        return error_response(404, "not_found", "no such route")

    @resolver.exception_handler(Exception)
    def _unexpected(exc: Exception) -> Response:
        log.exception("unhandled error", exc_info=exc)
        return error_response(500, "internal", "internal error")
