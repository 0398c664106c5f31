"""Routes for workflows: start one, see its graph, list them, cancel one."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from pydantic import BaseModel, Field

from leasehold import workflows
from leasehold.api import context
from leasehold.api.answers import answers, decode_cursor, encode_cursor, errors, links
from leasehold.api.models import (
    PAYLOAD_LIMITS,
    TEXT,
    ConcurrencyIn,
    JobErrorOut,
    Labels,
    PoolName,
    Priority,
    RetryIn,
    TaskName,
    ThrottleIn,
    _Strict,
)
from leasehold.tenancy import admission
from leasehold.workflows import WorkflowState
from leasehold.workflows.control import summary
from leasehold.workflows.graph import MAX_STEPS, STEP_ID
from leasehold.workflows.model import prepare
from leasehold.workflows.rerun import retry_workflow as rerun_workflow

router = Router()
#: Stated here, checked by the graph's validation (its messages say more than pydantic's).
STEP_COUNT: dict[str, Any] = {"minItems": 1, "maxItems": MAX_STEPS}
#: A tenant's workflows, newest first (the tenant is the caller's, never in the cursor).
WORKFLOW_CURSOR = {"created_at": int, "workflow_id": str}
WorkflowId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[0-9A-Za-z]+$")]
WorkflowStateName = Literal["CREATING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"]


class StepIn(_Strict):
    id: str = Field(min_length=1, max_length=64, pattern=STEP_ID.pattern, examples=["extract"])
    task: TaskName | None = Field(default=None, examples=["echo"],
                                  description="the step's task; or give `target`")
    target: dict[str, Any] | None = Field(
        default=None, description="a job with no code instead of `task`, as on POST /jobs")
    payload: Any = Field(default=None, description=PAYLOAD_LIMITS)
    depends_on: list[str] = Field(default_factory=list, description="ids of earlier steps")
    pool: PoolName | None = None
    priority: Priority | None = None
    max_attempts: int | None = Field(default=None, ge=1, le=100)
    timeout_seconds: float | None = Field(default=None, ge=1, le=86_400)
    retry: RetryIn | None = None
    failure_policy: Literal["fail_workflow", "continue", "ignore"] = Field(
        default="fail_workflow",
        description="fail_workflow: cancel the rest; continue: dependents run and see the "
                    "failure, the workflow ends FAILED; ignore: dependents run, the workflow "
                    "may succeed")
    labels: Labels = Field(default_factory=dict)
    concurrency: ConcurrencyIn | None = None
    throttle: ThrottleIn | None = None


class WorkflowIn(_Strict):
    steps: list[StepIn] = Field(description=f"a DAG of at most {MAX_STEPS} steps",
                                json_schema_extra=STEP_COUNT)
    name: str | None = Field(default=None, min_length=1, max_length=128, pattern=TEXT)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=256, pattern=TEXT)
    labels: Labels = Field(default_factory=dict)


class StepOut(BaseModel):
    id: str
    job_id: str
    task: str
    state: str
    depends_on: list[str]
    failure_policy: str | None
    waiting_for: int
    attempts: int
    started_at: str | None
    finished_at: str | None
    error: JobErrorOut | None
    result: Any = Field(default=None, description="the step's result once it succeeded")


class WorkflowSummary(BaseModel):
    workflow_id: str
    tenant: str
    name: str | None
    state: WorkflowStateName
    reason: str | None
    labels: dict[str, str]
    created_at: str | None
    finished_at: str | None
    step_count: int
    finished_steps: int
    schedule_id: str | None = None
    scheduled_for: str | None = None


class WorkflowOut(WorkflowSummary):
    counts: dict[str, int]
    steps: list[StepOut]


class WorkflowPage(BaseModel):
    workflows: list[WorkflowSummary]
    next_cursor: str | None = None


def detail_out(detail: workflows.WorkflowDetail) -> WorkflowOut:
    return WorkflowOut.model_validate(detail.view())


@router.post("/workflows", summary="Start a workflow", status_code=201, tags=["workflows"],
             responses={201: {"description": "started",
                              "content": {"application/json": {"model": WorkflowOut}},
                              "links": links("workflow_id", "$response.body#/workflow_id",
                                             "GET /workflows/{workflow_id}",
                                             "DELETE /workflows/{workflow_id}",
                                             "POST /workflows/{workflow_id}/retry")},
                        200: {"description": "idempotent replay: the workflow the first "
                                             "request started",
                              "content": {"application/json": {"model": WorkflowOut}}},
                        **errors(400, 401, 409, 413, 422, 429, 503)})
def start_workflow(body: WorkflowIn) -> Response[WorkflowOut]:
    app, api, tenant = context.leasehold(router), context.config(router), context.tenant(router)
    spec = workflows.parse_workflow(body.model_dump(mode="json", exclude_unset=True),
                                    tenant=tenant)
    # Validate the whole graph before admission: a bad one spends nothing, writes nothing.
    prepared = prepare(spec, app.registry, pools=app.settings.pools, now=app.now(),
                       timeout_limits=app.settings.job_timeout_limits())
    first_pool = prepared.steps[spec.steps[0].id].pool
    admission.check(app, tenant, first_pool, api.limits_for(app, tenant), api.backlog,
                    api.buckets)
    started = workflows.start_workflow(app, spec)
    detail = workflows.get_workflow(app, started.workflow.workflow_id)
    return Response(status_code=201 if started.created else 200,
                    content_type=content_types.APPLICATION_JSON, body=detail_out(detail))


@router.get("/workflows/<workflow_id>", summary="Get a workflow and its graph",
            tags=["workflows"], responses=answers(WorkflowOut, 401, 404, 422))
def get_workflow(workflow_id: WorkflowId) -> WorkflowOut:
    app = context.leasehold(router)
    return detail_out(workflows.get_workflow(app, workflow_id, context.tenant(router)))


@router.get("/workflows", summary="List your workflows, newest first", tags=["workflows"],
            responses=answers(WorkflowPage, 400, 401, 422))
def list_my_workflows(
    state: Annotated[WorkflowStateName | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(min_length=1, max_length=512)] = None,
) -> WorkflowPage:
    app, tenant = context.leasehold(router), context.tenant(router)
    after = decode_cursor(cursor, WORKFLOW_CURSOR) | {"tenant": tenant} if cursor else None
    found, last = workflows.list_workflows(
        app, tenant, limit=limit, cursor=after,
        state=None if state is None else WorkflowState(state))
    return WorkflowPage(
        workflows=[WorkflowSummary.model_validate(summary(w)) for w in found],
        next_cursor=encode_cursor(last, WORKFLOW_CURSOR))


@router.delete("/workflows/<workflow_id>", summary="Cancel a workflow and its live steps",
               tags=["workflows"], responses=answers(WorkflowOut, 401, 404, 409, 422))
def cancel_workflow(workflow_id: WorkflowId) -> WorkflowOut:
    app = context.leasehold(router)
    return detail_out(workflows.cancel_workflow(app, workflow_id, context.tenant(router)))


@router.post("/workflows/<workflow_id>/retry", summary="Resume a FAILED or CANCELLED workflow",
             description="Re-runs its failed (DEAD) and cancelled steps and every step "
                         "downstream of them; steps that succeeded upstream keep their "
                         "results. The workflow is RUNNING again. Admitted like a start.",
             tags=["workflows"], responses=answers(WorkflowOut, 401, 404, 409, 422, 429, 503))
def retry_workflow(workflow_id: WorkflowId) -> WorkflowOut:
    app, api, tenant = context.leasehold(router), context.config(router), context.tenant(router)
    current = workflows.get_workflow(app, workflow_id, tenant)  # another tenant's: 404
    pool = current.steps[0].pool if current.steps else app.settings.pools[0]
    admission.check(app, tenant, pool, api.limits_for(app, tenant), api.backlog, api.buckets)
    return detail_out(rerun_workflow(app, workflow_id, tenant))
