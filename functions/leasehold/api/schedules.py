"""Routes for schedules: create, inspect, list, update in place, delete, pause, resume,
trigger now, preview fire times; and the schedule filter of ``GET /jobs``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from pydantic import BaseModel, ConfigDict, Field

from leasehold.api import context
from leasehold.api.answers import (
    answers,
    decode_cursor,
    encode_cursor,
    errors,
    links,
    view,
)
from leasehold.api.models import (
    PAYLOAD_LIMITS,
    TEXT,
    ZERO_OR_MS,
    ConcurrencyIn,
    DebounceIn,
    IsoTime,
    JobOut,
    Labels,
    PoolName,
    Priority,
    TaskName,
    ThrottleIn,
    UniqueIn,
    _Strict,
)
from leasehold.api.workflows import STEP_COUNT, StepIn, WorkflowOut, detail_out
from leasehold.clock import iso
from leasehold.core.durations import MIN_SECONDS
from leasehold.lifecycle.app import Leasehold
from leasehold.time import schedules
from leasehold.time.schedule_model import MAX_CATCH_UP, MAX_JITTER_SECONDS, TEMPLATE_FIELDS
from leasehold.time.schedule_runs import last_started
from leasehold.time.schedules import Schedule
from leasehold.workflows import WorkflowDetail

router = Router()
ScheduleId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[0-9A-Za-z]+$")]


class ScheduledWorkflowIn(_Strict):
    """The workflow a schedule starts: the shape of POST /workflows, without an idempotency
    key (each run's id derives from the schedule and its fire time)."""

    steps: list[StepIn] = Field(description="a DAG of at most 500 steps",
                                json_schema_extra=STEP_COUNT)
    name: str | None = Field(default=None, min_length=1, max_length=128, pattern=TEXT)
    labels: Labels = Field(default_factory=dict)


class ScheduleIn(_Strict):
    """A new schedule (POST: ``cron``, and ``task`` or ``workflow``) or changes to one (PATCH).

    A schedule fires either one job (``task``, ``payload`` and the other job fields) or a whole
    workflow (``workflow``), never both.
    """

    name: str | None = Field(default=None, max_length=128, pattern=TEXT)
    # Optional in a PATCH, never null (the default is not validated; a null is a 422).
    cron: str = Field(default=None, max_length=256, pattern=r"\S",  # type: ignore[assignment]
                      examples=["*/5 * * * *"],
                      description="5-field cron, 6-field with leading seconds, "
                                  "@hourly-style alias, or rate(n unit)")
    timezone: str | None = Field(default=None, max_length=64, pattern=TEXT,
                                 examples=["Europe/London"])
    task: TaskName | None = Field(default=None, examples=["echo"])
    target: dict[str, Any] | None = Field(
        default=None, min_length=1, max_length=1,
        description="a job with no code instead of `task`, as on POST /jobs (one kind)")
    payload: Any = Field(default=None, description=PAYLOAD_LIMITS)
    priority: Priority | None = None
    pool: PoolName | None = None
    max_attempts: int | None = Field(default=None, ge=1, le=100)
    timeout_seconds: float | None = Field(default=None, ge=1, le=86_400)
    labels: Labels | None = None
    concurrency: ConcurrencyIn | None = None
    throttle: ThrottleIn | None = None
    unique: UniqueIn | None = Field(default=None, description=(
        "while the last run with this key is live, an occurrence is answered by it (skipped)"))
    debounce: DebounceIn | None = None
    start_within_seconds: float | None = Field(
        default=None, ge=MIN_SECONDS, le=366 * 86_400,
        description="a run not started this long after its time ends EXPIRED")
    workflow: ScheduledWorkflowIn | None = Field(
        default=None, description="start this workflow at each fire time instead of a job")
    misfire_policy: Literal["skip", "fire_once", "catch_up"] | None = None
    overlap_policy: Literal["allow", "forbid", "replace"] | None = None
    starting_deadline_seconds: float | None = Field(default=None, ge=1, le=366 * 86_400)
    max_catch_up: int | None = Field(default=None, ge=0, le=MAX_CATCH_UP)
    start_at: IsoTime | None = None
    end_at: IsoTime | None = None
    max_runs: int | None = Field(default=None, ge=1, le=10**9)
    jitter_seconds: Annotated[float, Field(ge=0, le=MAX_JITTER_SECONDS), *ZERO_OR_MS] | None = None


def _one_target() -> dict[str, Any]:
    """What POST /schedules states beyond the fields: a ``cron``, and a job (``task``), a job
    with no code (``target``) or a workflow, one of them; a workflow takes none of the job's
    fields, nor jitter (the rule ``leasehold.time.templates.resolve_target`` applies)."""
    job_fields = sorted(TEMPLATE_FIELDS)
    return {"required": ["cron"], "oneOf": [
        {"title": "a job", "required": ["task"],
         "not": {"anyOf": [{"required": ["workflow"]}, {"required": ["target"]}]},
         "properties": {"task": {"type": "string"}}},
        {"title": "a job with no code", "required": ["target"],
         "not": {"anyOf": [{"required": ["workflow"]}, {"required": ["task"]}]},
         "properties": {"target": {"type": "object"}}},
        {"title": "a workflow", "required": ["workflow"],
         "not": {"anyOf": [{"required": [name]} for name in job_fields]},
         "properties": {"workflow": {"type": "object"},
                        "jitter_seconds": {"enum": [0, None]}}}]}


class NewScheduleIn(ScheduleIn):
    """A new schedule: a ``cron``, and a ``task`` (a job), a ``target`` (a job with no code)
    or a ``workflow``, one of them."""

    model_config = ConfigDict(json_schema_extra=_one_target())


class ScheduleOut(BaseModel):
    schedule_id: str
    tenant: str
    name: str
    cron: str
    timezone: str
    task: str | None = None
    payload: Any = None
    pool: str | None = None
    priority: str | None = None
    max_attempts: int | None = None
    timeout_seconds: float | None = None
    labels: dict[str, str] | None = None
    concurrency: dict[str, Any] | None = None
    throttle: dict[str, Any] | None = None
    unique: dict[str, Any] | None = None
    debounce: dict[str, Any] | None = None
    start_within_seconds: float | None = None
    #: Each step with its defaults resolved: a body POST /workflows or a schedule accepts.
    workflow: ScheduledWorkflowIn | None = None
    misfire_policy: str
    overlap_policy: str
    starting_deadline_seconds: float
    max_catch_up: int
    start_at: str | None
    end_at: str | None
    max_runs: int | None
    jitter_seconds: float
    state: Literal["ACTIVE", "PAUSED", "COMPLETED"]
    next_fire_at: str | None
    run_count: int = Field(description=(
        "runs fired: started ones, plus at most the few handed off ahead of their time (a "
        "pause, update or delete withdraws those and takes them off this count)"))
    skipped_count: int
    last_fired_at: str | None = Field(description=(
        "the time of the last occurrence handed off; runs are handed off ahead, so it may "
        "be in the future (see last_started_at)"))
    last_started_at: str | None = Field(default=None, description=(
        "when the latest run that has started started (GET /schedules/{id} only)"))
    last_started_job_id: str | None = Field(default=None, description=(
        "that run's job, or workflow (GET /schedules/{id} only)"))
    last_job_id: str | None
    last_workflow_id: str | None = None
    created_at: str | None
    updated_at: str | None
    version: int
    failures: int = Field(default=0, description=(
        "fires that failed since the last one that worked (a change to the schedule resets "
        "it); the ticker waits longer after each, see retry_at"))
    last_error: str | None = Field(default=None, description=(
        "why the latest fire failed, in one line (cleared by the next that works)"))
    last_error_at: str | None = None
    retry_at: str | None = Field(default=None, description=(
        "while failing: the ticker does not try this schedule again before this time"))


class SchedulePage(BaseModel):
    schedules: list[ScheduleOut]
    next_cursor: str | None = None


class FireTimes(BaseModel):
    schedule_id: str
    times: list[str] = Field(description="ISO-8601 UTC")
    timezone: str = Field(default="UTC", description="the schedule's IANA zone")
    local_times: list[str] = Field(default_factory=list, description=(
        "the same times in the schedule's zone, ISO-8601 with its offset"))


def out(schedule: Schedule) -> ScheduleOut:
    return ScheduleOut.model_validate(schedule.view())


def _body(body: ScheduleIn) -> dict[str, Any]:  # or a NewScheduleIn
    return body.model_dump(mode="json", exclude_unset=True)


#: What a created schedule's id leads to.
SCHEDULE_OPERATIONS = (
    "GET /schedules/{schedule_id}", "PATCH /schedules/{schedule_id}",
    "DELETE /schedules/{schedule_id}", "POST /schedules/{schedule_id}/pause",
    "POST /schedules/{schedule_id}/resume", "POST /schedules/{schedule_id}/trigger",
    "GET /schedules/{schedule_id}/next")
#: A tenant's schedules, from the ``by_tenant`` index of the schedules table.
SCHEDULE_CURSOR = {"schedule_id": str, "created_at": int}


@router.post("/schedules", summary="Create a schedule", status_code=201, tags=["schedules"],
             responses={201: {"description": "created",
                              "content": {"application/json": {"model": ScheduleOut}},
                              "links": links("schedule_id", "$response.body#/schedule_id",
                                             *SCHEDULE_OPERATIONS)},
                        **errors(400, 401, 422)})
def create_schedule(body: NewScheduleIn) -> Response[ScheduleOut]:
    app = context.leasehold(router)
    schedule = schedules.create(app, _body(body), tenant=context.tenant(router))
    return Response(status_code=201, content_type=content_types.APPLICATION_JSON,
                    body=out(schedule))


@router.get("/schedules", summary="List your schedules, newest first", tags=["schedules"],
            responses=answers(SchedulePage, 400, 401, 422))
def list_my_schedules(limit: Annotated[int, Query(ge=1, le=200)] = 50,
                      cursor: Annotated[str | None, Query(max_length=512)] = None
                      ) -> SchedulePage:
    app, tenant = context.leasehold(router), context.tenant(router)
    after = None
    if cursor:
        after = decode_cursor(cursor, SCHEDULE_CURSOR) | {"tenant": tenant}
    found, last = schedules.list_schedules(app, tenant, limit=limit, cursor=after)
    return SchedulePage(schedules=[out(s) for s in found],
                        next_cursor=encode_cursor(last, SCHEDULE_CURSOR))


@router.get("/schedules/<schedule_id>", summary="Get a schedule", tags=["schedules"],
            responses=answers(ScheduleOut, 401, 404, 422))
def get_schedule(schedule_id: ScheduleId) -> ScheduleOut:
    app = context.leasehold(router)
    schedule = schedules.get(app, schedule_id, context.tenant(router))
    shown = out(schedule)
    if schedule.workflow is None:
        run = last_started(app, schedule, app.now())
        if run is not None:
            shown.last_started_at = iso(run.first_started_at or run.started_at)
            shown.last_started_job_id = run.job_id
    elif schedule.last_job_id:
        # A workflow run starts when it is due, never ahead: the last one fired has started.
        shown.last_started_at, shown.last_started_job_id = \
            iso(schedule.last_fired_at), schedule.last_job_id
    return shown


@router.patch("/schedules/<schedule_id>", summary="Update a schedule in place (atomically)",
              tags=["schedules"], responses=answers(ScheduleOut, 400, 401, 404, 409, 422))
def update_schedule(schedule_id: ScheduleId, body: ScheduleIn) -> ScheduleOut:
    app = context.leasehold(router)
    return out(schedules.update(app, schedule_id, _body(body), context.tenant(router)))


@router.delete("/schedules/<schedule_id>", summary="Delete a schedule", tags=["schedules"],
               responses={204: {"description": "deleted", "content": {}},  # no body
                          **errors(401, 404, 409, 422)})
def delete_schedule(schedule_id: ScheduleId) -> Response[None]:
    schedules.delete(context.leasehold(router), schedule_id, context.tenant(router))
    return Response(status_code=204)


def _action(name: str, summary: str,
            act: Callable[[Leasehold, str, str | None], Schedule]) -> None:
    @router.post(f"/schedules/<schedule_id>/{name}", summary=summary, tags=["schedules"],
                 responses=answers(ScheduleOut, 401, 404, 409, 422))
    def action(schedule_id: ScheduleId) -> ScheduleOut:
        return out(act(context.leasehold(router), schedule_id, context.tenant(router)))

    action.__name__ = f"{name}_schedule"


_action("pause", "Pause a schedule (withdraws runs handed off ahead)", schedules.pause)
_action("resume", "Resume a paused schedule from its next time", schedules.resume)


@router.post("/schedules/<schedule_id>/trigger",
             summary="Run the schedule's job (or workflow) now, once",
             status_code=201, tags=["schedules"],
             responses={201: {"description": "the job, or the workflow of a workflow schedule",
                              "content": {"application/json": {"model": JobOut | WorkflowOut}}},
                        **errors(401, 404, 409, 422)})
def trigger_schedule(schedule_id: ScheduleId) -> Response[JobOut | WorkflowOut]:
    run = schedules.trigger(context.leasehold(router), schedule_id, context.tenant(router))
    body = detail_out(run) if isinstance(run, WorkflowDetail) else view(run)
    return Response(status_code=201, content_type=content_types.APPLICATION_JSON, body=body)


@router.get("/schedules/<schedule_id>/next", summary="Preview the next fire times",
            tags=["schedules"], responses=answers(FireTimes, 401, 404, 422))
def next_fire_times(schedule_id: ScheduleId,
                    count: Annotated[int, Query(ge=1, le=100)] = 5) -> FireTimes:
    app = context.leasehold(router)
    times = schedules.preview(app, schedule_id, count, context.tenant(router))
    zone = schedules.get(app, schedule_id).timezone
    return FireTimes(schedule_id=schedule_id, times=[iso(t) or "" for t in times],
                     timezone=zone, local_times=[in_zone(t, zone) for t in times])


def in_zone(ms: int, zone: str) -> str:
    """``ms`` as ISO-8601 in ``zone`` with its offset (Tokyo 09:00 is 09:00+09:00)."""
    return datetime.fromtimestamp(ms / 1000, ZoneInfo(zone)).isoformat(timespec="seconds")
