"""The API resolver: one router per concern, errors mapped in one place, OpenAPI served.

Adding a concern is one line in :data:`ROUTERS`.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from collections.abc import Mapping
from re import Match
from typing import Any
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.models import Tag

from leasehold import __version__
from leasehold.api import (
    admin,
    batch,
    bulk,
    console,
    durable,
    errors,
    figures,
    flow,
    jobs,
    schedules,
    tasks,
    triggers,
    workers,
    workflows,
)
from leasehold.api.answers import errors as error_answers
from leasehold.api.context import ApiConfig
from leasehold.api.front_door import NEW_WORK, front_door
from leasehold.api.surrogates import lone_surrogate
from leasehold.core.spec import MAX_PAYLOAD_BYTES
from leasehold.lifecycle.app import Leasehold
from leasehold.tracing.carrier import incoming

ROUTERS: tuple[Router, ...] = (
    bulk.router,  # before jobs: /jobs/bulk is not a job id
    batch.router,  # nor /jobs/batch
    jobs.router,
    admin.router,
    figures.router,
    schedules.router,
    triggers.router,
    workflows.router,
    console.router,
    flow.router,
    durable.router,
    tasks.router,
    workers.router,
)

TITLE = "Leasehold"
#: A payload at its limit plus the rest of a submission; larger bodies are refused unread.
MAX_BODY_BYTES = MAX_PAYLOAD_BYTES + 64 * 1024
#: ``POST /jobs/batch``'s body: 1 MiB, SQS ``SendMessageBatch``'s total. Each item still has
#: its own payload limit; the answer echoes every job (payload included), so a batch at its
#: limit answers about as much, well under Lambda's 6 MB for a request and its answer.
MAX_BATCH_BODY_BYTES = 1024 * 1024
#: A remote worker's ``complete`` (docs/protocol.md, "Sizes"): any body that reaches the
#: function (Lambda takes 6 MB a request) is read, so a result over its limit ends the
#: attempt ``PayloadTooLarge`` rather than leaving the job RUNNING for a lease.
MAX_COMPLETE_BODY_BYTES = 6 * 1024 * 1024
#: Paths whose bodies may be larger than :data:`MAX_BODY_BYTES`.
BODY_LIMITS = {"/jobs/batch": MAX_BATCH_BODY_BYTES}
_COMPLETE = re.compile(r"/jobs/[0-9A-Za-z]+/complete")


def body_limit(path: str) -> int:
    """The largest body read on ``path``; larger ones are answered 413 unread."""
    if _COMPLETE.fullmatch(path):
        return MAX_COMPLETE_BODY_BYTES
    return BODY_LIMITS.get(path, MAX_BODY_BYTES)


class ConcurrentRestResolver(APIGatewayRestResolver):
    """A REST resolver that answers requests from several threads at once.

    Powertools keeps the request being answered on the resolver: the event and Lambda context
    on the ``BaseRouter`` class itself, the routing context (route arguments, our ``leasehold``
    and ``api_config``) on the instance. Two threads resolving at once would read each other's
    event, path parameters or tenant. Here that state is per thread, so one resolver (and the
    module-level routers, which delegate to it) serves the local gateway's threads; in Lambda,
    one request per process, nothing changes.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._local = threading.local()
        super().__init__(**kwargs)

    @property
    def current_event(self) -> Any:
        return self._local.event

    @current_event.setter
    def current_event(self, value: Any) -> None:
        self._local.event = value

    @property
    def lambda_context(self) -> Any:
        return getattr(self._local, "lambda_context", None)

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._local.lambda_context = value

    @property
    def context(self) -> dict[str, Any]:
        if not hasattr(self._local, "context"):
            self._local.context = {}
        return self._local.context

    @context.setter
    def context(self, value: dict[str, Any]) -> None:
        self._local.context = value

    @property
    def processed_stack_frames(self) -> list[str]:
        if not hasattr(self._local, "frames"):
            self._local.frames = []
        return self._local.frames

    @processed_stack_frames.setter
    def processed_stack_frames(self, value: list[str]) -> None:
        self._local.frames = value

    def resolve(self, event: Any, context: Any) -> dict[str, Any]:
        # Powertools also stores the event on the BaseRouter class; nothing here reads that.
        self.current_event = self._to_proxy_event(dict(event))
        self.lambda_context = context
        return super().resolve(event, context)

    def _convert_matches_into_route_keys(self, match: Match[str]) -> dict[str, str]:
        """Path parameters decoded, once, after the route matched the path as sent: a token's
        ``:`` sent as ``%3A`` is a ``:``, and its length and pattern are checked on what it
        says (the route is still matched undecoded, so a flow key may hold ``%2F``)."""
        return {name: unquote(value) for name, value in match.groupdict().items()}

    def build_middleware_stacks(self) -> None:
        """Build every route's middleware stack now: Powertools builds it on a route's first
        call, and two threads making that first call at once would both wrap it."""
        for route in (*self._static_routes, *self._dynamic_routes):
            if not route._middleware_stack_built:
                route._build_middleware_stack(router_middlewares=self._router_middlewares,
                                              app=self)


def build() -> APIGatewayRestResolver:
    resolver = ConcurrentRestResolver(enable_validation=True)
    errors.install(resolver)
    for router in ROUTERS:
        resolver.include_router(router)

    _document_unreadable(resolver)
    # New work passes the features' front doors first (a cell's 421 for a tenant homed in
    # another Region).
    resolver.use([front_door])
    for route in (*resolver._static_routes, *resolver._dynamic_routes):
        if route.include_in_schema and route.responses and \
                (route.method, route.path) in NEW_WORK:
            for status, answer in error_answers(421, 503).items():
                route.responses.setdefault(status, answer)

    @resolver.get("/openapi.json", include_in_schema=False)
    def openapi() -> Response[str]:
        return Response(status_code=200, content_type=content_types.APPLICATION_JSON,
                        body=openapi_json())

    # Swagger UI over the same OpenAPI document: the page at /docs, the document at
    # /docs?format=json (both behind the same identity as every other route).
    resolver.enable_swagger(path="/docs", title=TITLE, version=__version__,
                            description=DESCRIPTION, tags=TAGS)
    resolver.build_middleware_stacks()
    return resolver


def _document_unreadable(resolver: APIGatewayRestResolver) -> None:
    """Every route that reads a body may be answered 400 or 413 before it is reached
    (:func:`_unreadable`): its OpenAPI answers say so."""
    for route in (*resolver._static_routes, *resolver._dynamic_routes):
        if route.include_in_schema and route.responses and route.dependant.body_params:
            for status, answer in error_answers(400, 413).items():
                route.responses.setdefault(status, answer)


DESCRIPTION = "Submit, inspect, cancel and retry jobs; see workers, dead letters, stats."
#: Tags described in the document (the worker protocol's links to docs/protocol.md).
TAGS: list[Tag | str] = [workers.TAG]
resolver = build()


def openapi_json() -> str:
    """The OpenAPI document, as served and as committed in ``docs/openapi.json``."""
    document = json.loads(resolver.get_openapi_json_schema(
        title=TITLE, version=__version__, description=DESCRIPTION, tags=TAGS))
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def _early(status: int, code: str, message: str, field: str | None = None) -> dict[str, Any]:
    """An error answered before routing, in the same shape as :mod:`leasehold.api.errors`."""
    return {"statusCode": status, "headers": {"Content-Type": content_types.APPLICATION_JSON},
            "body": json.dumps({"error": {"code": code, "message": message, "field": field}}),
            "isBase64Encoded": False}


def _unreadable(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """413 for a body over the limit, 400 for one that is not UTF-8 text (lone surrogates
    included: they cannot be stored)."""
    body = event.get("body") or ""
    size = len(body) * 3 // 4 if event.get("isBase64Encoded") else len(body.encode())
    limit = body_limit(str(event.get("path") or ""))
    if size > limit:
        return _early(413, "payload_too_large",
                      f"the body is {size} bytes; the limit is {limit}")
    if event.get("isBase64Encoded") and body:
        try:
            body = base64.b64decode(body).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return _early(400, "bad_request", "the body is not UTF-8 JSON")
    where = lone_surrogate(body)
    if where is not None:
        return _early(400, "bad_request", f"{where}: holds a lone surrogate (such as \\ud800), "
                                          "which is not text", where)
    return None


def _as_json(event: Mapping[str, Any]) -> dict[str, Any]:
    """The API speaks JSON only: read every body as JSON whatever its declared type (curl's
    ``-d`` says form-urlencoded), so a bad body gets one clear 400 instead of a form error."""
    event = dict(event)
    if event.get("body"):
        headers = {k: v for k, v in (event.get("headers") or {}).items()
                   if k.lower() != "content-type"}
        event["headers"] = {**headers, "Content-Type": content_types.APPLICATION_JSON}
        multi = {k: v for k, v in (event.get("multiValueHeaders") or {}).items()
                 if k.lower() != "content-type"}
        event["multiValueHeaders"] = {**multi, "Content-Type": [content_types.APPLICATION_JSON]}
    return event


def handle(app: Leasehold, event: Mapping[str, Any], lambda_context: Any = None,
           api_config: ApiConfig | None = None) -> dict[str, Any]:
    """Answer one API Gateway REST proxy event. Safe to call from several threads at once
    (the local gateway does): the resolver keeps each request's state per thread."""
    early = _unreadable(event)
    if early is not None:
        return early
    event = _as_json(event)
    resolver.append_context(leasehold=app, api_config=api_config or ApiConfig.from_env())
    # The caller's trace (W3C traceparent/tracestate headers) is current while the request
    # is answered: every job it makes continues it (leasehold.tracing).
    with incoming(event.get("headers")):
        return resolver.resolve(event, lambda_context)
