"""Routes for jobs: submit, inspect, list, cancel, retry."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from pydantic import BaseModel

from leasehold.api import context
from leasehold.api.errors import BadRequest
from leasehold.api.models import ErrorOut, JobOut, JobPage, Priority, StateName, SubmitJob
from leasehold.clock import to_ms
from leasehold.core.jobs import Job
from leasehold.core.policy import RetryPolicy
from leasehold.core.spec import JobSpec, resolve
from leasehold.core.states import JobState
from leasehold.lifecycle import control
from leasehold.lifecycle.submission import submit
from leasehold.tenancy.admission import admit
from leasehold.tenancy.listing import JobFilter, list_jobs

router = Router()


def errors(*statuses: int) -> dict[int, OpenAPIResponse]:
    """OpenAPI entries for the error answers a route can give (all share one body)."""
    return {status: {"description": "error",
                     "content": {"application/json": {"model": ErrorOut}}}
            for status in statuses}


def answers(model: type[BaseModel], *statuses: int) -> dict[int, OpenAPIResponse]:
    """The 200 answer and the error answers (Powertools drops its default 200 when given any)."""
    return {200: {"description": "ok", "content": {"application/json": {"model": model}}},
            **errors(*statuses)}


def view(job: Job) -> JobOut:
    return JobOut.model_validate(job.view())


def spec_from(body: SubmitJob, tenant: str) -> JobSpec:
    retry = None
    if body.retry is not None:
        retry = RetryPolicy.from_dict(body.retry.model_dump(exclude_none=True))
    return JobSpec(
        task=body.task, payload=body.payload, tenant=tenant, pool=body.pool,
        priority=body.priority, run_at_ms=None if body.run_at is None else to_ms(body.run_at),
        delay_seconds=body.delay_seconds, idempotency_key=body.idempotency_key,
        max_attempts=body.max_attempts, retry=retry, timeout_seconds=body.timeout_seconds,
        labels=body.labels,
    )


JobId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[0-9A-Za-z]+$")]


@router.post(
    "/jobs", summary="Submit a job", status_code=201, tags=["jobs"],
    responses={201: {"description": "created",
                     "content": {"application/json": {"model": JobOut}}},
               200: {"description": "idempotent replay: the job the first submission made",
                     "content": {"application/json": {"model": JobOut}}},
               **errors(400, 401, 409, 413, 422, 429, 503)},
)
def submit_job(body: SubmitJob) -> Response[JobOut]:
    app, api = context.leasehold(router), context.config(router)
    tenant = context.tenant(router)
    spec = spec_from(body, tenant)
    # Validate before admission so bad input spends no token and writes nothing.
    resolved = resolve(spec, app.registry, pools=app.settings.pools, now_ms=app.now())
    with admit(app, tenant, resolved.pool, api.limits, api.backlog, api.buckets):
        result = submit(app, spec, counted=True)
    return Response(status_code=201 if result.created else 200,
                    content_type=content_types.APPLICATION_JSON, body=view(result.job))


@router.get("/jobs/<job_id>", summary="Get a job", tags=["jobs"],
            responses=answers(JobOut, 400, 401, 404, 422))
def get_job(job_id: JobId) -> JobOut:
    app = context.leasehold(router)
    return view(control.get_job(app, job_id, context.tenant(router)))


def encode_cursor(position: dict[str, Any] | None) -> str | None:
    if position is None:
        return None
    text = json.dumps([position["created_at"], position["job_id"]], separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_cursor(cursor: str, tenant: str) -> dict[str, Any]:
    try:
        created_at, job_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(created_at, int) or not isinstance(job_id, str):
            raise ValueError(cursor)
    except (ValueError, TypeError, binascii.Error):
        raise BadRequest("cursor is not one this API returned", field="cursor") from None
    # The tenant is not in the cursor: it is always the caller's, so a cursor cannot be
    # replayed against another tenant's listing.
    return {"tenant": tenant, "created_at": created_at, "job_id": job_id}


@router.get("/jobs", summary="List your jobs, newest first", tags=["jobs"],
            responses=answers(JobPage, 400, 401, 422))
def list_my_jobs(
    state: Annotated[list[StateName] | None, Query(description="repeat for several")] = None,
    task: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    pool: Annotated[str | None, Query(min_length=1, max_length=32)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(min_length=1, max_length=512)] = None,
    schedule_id: Annotated[str | None, Query(min_length=1, max_length=64,
                                             description="only this schedule's runs")] = None,
) -> JobPage:
    app = context.leasehold(router)
    tenant = context.tenant(router)
    if schedule_id is not None:
        from leasehold.api.schedules import jobs_page  # it imports this module

        return jobs_page(app, tenant, schedule_id, limit=limit, cursor=cursor)
    where = JobFilter(states={JobState(s) for s in state or ()}, task=task, pool=pool)
    after = decode_cursor(cursor, tenant) if cursor else None
    jobs, position = list_jobs(app, tenant, limit=limit, where=where, after=after)
    return JobPage(jobs=[view(j) for j in jobs], next_cursor=encode_cursor(position))


@router.delete("/jobs/<job_id>", summary="Cancel a job", tags=["jobs"],
               responses=answers(JobOut, 400, 401, 404, 409, 422))
def cancel_job(job_id: JobId) -> JobOut:
    app = context.leasehold(router)
    return view(control.cancel(app, job_id, context.tenant(router)))


@router.post("/jobs/<job_id>/retry", summary="Re-run a DEAD or CANCELLED job", tags=["jobs"],
             responses=answers(JobOut, 400, 401, 404, 409, 422))
def retry_job(job_id: JobId) -> JobOut:
    app = context.leasehold(router)
    return view(control.retry(app, job_id, context.tenant(router)))


__all__ = ["Priority", "router"]
