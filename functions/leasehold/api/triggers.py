"""Routes for event triggers, and ``POST /events``, which plays PutEvents for them.

On AWS an EventBridge rule delivers events to the trigger handler; ``POST /events`` is the
same dispatch for the local runtime (and for callers that prefer HTTP), scoped to the
caller's tenant.
"""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import BaseModel, ConfigDict, Field

from leasehold.api import context
from leasehold.api.answers import answers, errors, links
from leasehold.api.models import (
    PAYLOAD_LIMITS,
    TEXT,
    ConcurrencyIn,
    DebounceIn,
    Labels,
    PoolName,
    Priority,
    TaskName,
    ThrottleIn,
    UniqueIn,
    _Strict,
)
from leasehold.core.durations import MIN_SECONDS
from leasehold.events import triggers

router = Router()
TriggerId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[0-9A-Za-z]+$")]


class TriggerIn(_Strict):
    name: str | None = Field(default=None, max_length=128, pattern=TEXT)
    pattern: dict[str, Any] = Field(
        min_length=1, description="EventBridge event pattern (not empty)",
        examples=[{"source": ["shop"]}])
    task: TaskName | None = Field(default=None, examples=["echo"],
                                  description="the registered task to run; or give `target`")
    target: dict[str, Any] | None = Field(default=None, min_length=1, max_length=1, description=(
        "a job with no code, as POST /jobs takes it (one kind); an HTTP target with no "
        "`body` (and a method that takes one) sends the event at input_path as its body; an "
        "AWS target's parameters are used as given"))
    payload: Any = Field(default=None, description="fixed payload; else the event at "
                                                   "input_path. " + PAYLOAD_LIMITS)
    input_path: str | None = Field(default=None, max_length=256, pattern=TEXT,
                                   examples=["$.detail"])
    priority: Priority | None = None
    pool: PoolName | None = None
    max_attempts: int | None = Field(default=None, ge=1, le=100)
    timeout_seconds: float | None = Field(default=None, ge=1, le=86_400)
    labels: Labels | None = None
    concurrency: ConcurrencyIn | None = None
    throttle: ThrottleIn | None = None
    unique: UniqueIn | None = Field(default=None, description=(
        "while a job of this key is live, a matching event is answered by it"))
    debounce: DebounceIn | None = Field(default=None, description=(
        "matching events within `seconds` of each other make one run, with the latest "
        "payload"))
    start_within_seconds: float | None = Field(default=None, ge=MIN_SECONDS, le=366 * 86_400)


class TriggerOut(BaseModel):
    trigger_id: str
    tenant: str
    name: str
    pattern: dict[str, Any]
    task: str
    target: dict[str, Any] | None = None
    payload: Any = None
    input_path: str
    pool: str
    priority: str
    concurrency: dict[str, Any] | None = None
    throttle: dict[str, Any] | None = None
    unique: dict[str, Any] | None = None
    debounce: dict[str, Any] | None = None
    start_within_seconds: float | None = None
    created_at: str | None


class TriggerList(BaseModel):
    triggers: list[TriggerOut]


class EventIn(BaseModel):
    """An event as PutEvents takes it (``detail`` is an object here, not a string)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, strict=True)
    id: str | None = Field(default=None, max_length=128,
                           description="dedupes redeliveries; generated if absent")
    source: str = Field(min_length=1, max_length=256)
    detail_type: str = Field(alias="detail-type", min_length=1, max_length=256)
    detail: dict[str, Any] = Field(default_factory=dict)


class Dispatched(BaseModel):
    job_ids: list[str]


@router.post("/triggers", summary="Create an event trigger", status_code=201,
             tags=["triggers"],
             responses={201: {"description": "created",
                              "content": {"application/json": {"model": TriggerOut}},
                              "links": links("trigger_id", "$response.body#/trigger_id",
                                             "GET /triggers/{trigger_id}",
                                             "DELETE /triggers/{trigger_id}")},
                        **errors(400, 401, 422)})
def create_trigger(body: TriggerIn) -> Response[TriggerOut]:
    app = context.leasehold(router)
    trigger = triggers.create(app, body.model_dump(exclude_unset=True),
                              tenant=context.tenant(router))
    return Response(status_code=201, content_type=content_types.APPLICATION_JSON,
                    body=TriggerOut.model_validate(trigger.view()))


@router.get("/triggers", summary="List your triggers", tags=["triggers"],
            responses=answers(TriggerList, 401))
def list_my_triggers() -> TriggerList:
    found = triggers.list_triggers(context.leasehold(router), context.tenant(router))
    return TriggerList(triggers=[TriggerOut.model_validate(t.view()) for t in found])


@router.get("/triggers/<trigger_id>", summary="Get a trigger", tags=["triggers"],
            responses=answers(TriggerOut, 401, 404, 422))
def get_trigger(trigger_id: TriggerId) -> TriggerOut:
    trigger = triggers.get(context.leasehold(router), trigger_id, context.tenant(router))
    return TriggerOut.model_validate(trigger.view())


@router.delete("/triggers/<trigger_id>", summary="Delete a trigger", tags=["triggers"],
               responses={204: {"description": "deleted", "content": {}},  # no body
                          **errors(401, 404, 422)})
def delete_trigger(trigger_id: TriggerId) -> Response[None]:
    triggers.delete(context.leasehold(router), trigger_id, context.tenant(router))
    return Response(status_code=204)


@router.post("/events", summary="Put an event: matching triggers submit their jobs",
             tags=["triggers"], responses=answers(Dispatched, 400, 401, 413, 422))
def put_event(body: EventIn) -> Dispatched:
    app = context.leasehold(router)
    event = body.model_dump(by_alias=True, exclude_none=True)
    jobs = triggers.dispatch(app, event, tenant=context.tenant(router))
    return Dispatched(job_ids=[job.job_id for job in jobs])
