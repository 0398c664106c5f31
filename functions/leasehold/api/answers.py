"""What every router answers with: OpenAPI answer entries, the job view and opaque cursors.
Routers import this, never each other's modules. Domain validation errors need no wrapping:
:mod:`leasehold.api.errors` answers every one with 422 naming the field."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel

from leasehold.api.errors import BadRequest
from leasehold.api.models import ErrorOut, JobOut
from leasehold.core.jobs import Job
from leasehold.core.states import JobState


def errors(*statuses: int) -> dict[int, OpenAPIResponse]:
    """OpenAPI entries for the error answers a route can give (all share one body)."""
    return {status: {"description": "error",
                     "content": {"application/json": {"model": ErrorOut}}}
            for status in statuses}


def answers(model: type[BaseModel], *statuses: int, links: dict[str, Any] | None = None
            ) -> dict[int, OpenAPIResponse]:
    """The 200 answer and the error answers (Powertools drops its default 200 when given any)."""
    ok: OpenAPIResponse = {"description": "ok",
                           "content": {"application/json": {"model": model}}}
    if links:
        ok["links"] = links
    return {200: ok, **errors(*statuses)}


def links(parameter: str, value: str, *operations: str) -> dict[str, Any]:
    """OpenAPI links from an answer to ``operations`` (``"GET /schedules/{schedule_id}"``),
    each given ``parameter`` from the answer (``$response.body#/schedule_id``): what a client
    (and Schemathesis' stateful tests) may call next with what it got."""
    found = {}
    for operation in operations:
        method, path = operation.split(" ", 1)
        name = "".join(part.title() for part in path.replace("{", "").replace("}", "")
                       .replace("_", "/").split("/"))
        found[method.title() + name] = {
            "operationRef": "#/paths/" + path.replace("~", "~0").replace("/", "~1") + "/"
                            + method.lower(),
            "parameters": {parameter: value}}
    return found


def view(job: Job, now: int | None = None) -> JobOut:
    """The job as the API shows it; given ``now``, a job still waiting for its ``run_at``
    says how long (``due_in_seconds``), so a schedule's runs handed off ahead of time do not
    read as ready work."""
    shown = job.view()
    waiting = job.state in (JobState.SCHEDULED, JobState.QUEUED)  # a retry's backoff too
    if now is not None and waiting and job.run_at > now:
        shown["due_in_seconds"] = round((job.run_at - now) / 1000, 1)
    return JobOut.model_validate(shown)


def encode_cursor(position: Mapping[str, Any] | None, keys: Mapping[str, type]) -> str | None:
    """An opaque cursor for a listing's next page: the ``keys`` of its last position."""
    if not position:
        return None
    # DynamoDB numbers arrive as Decimal: each key is stored as the type it is read back as.
    text = json.dumps({key: kind(position[key]) for key, kind in keys.items()},
                      separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, keys: Mapping[str, type]) -> dict[str, Any]:
    """The position in a cursor this API returned; anything else is a 400 naming ``cursor``.

    The tenant is never in a cursor: the caller adds its own, so a cursor cannot be replayed
    against another tenant's listing.
    """
    try:
        position = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(position, dict) or set(position) != set(keys) or not all(
                type(position[key]) is kind for key, kind in keys.items()):
            raise ValueError(cursor)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise BadRequest("cursor is not one this API returned", field="cursor") from None
    return position
