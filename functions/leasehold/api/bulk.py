"""``POST /jobs/bulk``: preview, then run, an action on every job a search matches."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import BaseModel, Field

from leasehold.api import context
from leasehold.api.answers import answers, errors, view
from leasehold.api.models import JobOut, _Strict
from leasehold.api.search import COST_NOTE, SearchIn
from leasehold.bulk import run
from leasehold.clock import iso
from leasehold.core.jobs import Job
from leasehold.core.spec import JobSpec
from leasehold.errors import NotFound
from leasehold.lifecycle import control
from leasehold.tenancy.admission import submit_admitted

router = Router()


class BulkIn(_Strict):
    action: Literal["retry", "cancel", "redrive", "delete"]
    filter: SearchIn = Field(default_factory=SearchIn, description=(
        "the filters of GET /jobs; the action's own states apply on top (retry: DEAD or "
        "CANCELLED, redrive: DEAD, cancel: live, delete: finished)"))
    dry_run: bool = Field(default=False, description="answer the count only, change nothing")


CREATED_BEFORE = ("the action's bound: it acts only on jobs created before this time, the "
                  "moment it was asked for (or the filter's earlier created_before); jobs "
                  "submitted later are never touched")
REFERENCED = ("delete only: finished jobs kept because something still references them (a "
              "step of a workflow that still exists, the child of a live durable job)")


class BulkPreview(BaseModel):
    dry_run: Literal[True] = True
    action: str
    matches: int = Field(description="jobs the action would touch now")
    complete: bool = Field(description="false: the count stopped early, there are at least "
                                       "this many (narrow the search with created_after)")
    sample: list[str] = Field(description="the first few of them (oldest first)")
    created_before: str | None = Field(default=None, description=CREATED_BEFORE)
    skipped_referenced: int = Field(default=0, description=REFERENCED)
    referenced_by: dict[str, int] = Field(
        default_factory=dict, examples=[{"workflow": 4}],
        description="skipped_referenced by reason: workflow, durable parent")


class BulkJob(JobOut):
    bulk_id: str = Field(description="the bulk job's id: follow it at GET /jobs/bulk/{id}")
    created_before: str | None = Field(default=None, description=CREATED_BEFORE)


def bulk_view(job: Job, now: int) -> BulkJob:
    """The bulk job as both routes answer it: its id as ``bulk_id``, and its bound."""
    shown = view(job, now).model_dump(by_alias=True)
    try:
        bound = run.filter_from_payload(json.loads(job.payload_json)["filter"]).created_before
    except (KeyError, TypeError, ValueError):
        bound = None  # not a payload this route wrote: the job fails with InvalidPayload
    return BulkJob(**shown, bulk_id=job.job_id, created_before=iso(bound))


@router.post("/jobs/bulk", summary="Retry, cancel, redrive or delete every job a search "
                                    "matches", tags=["jobs"],
             description="A dry run answers the count. Otherwise the action runs as a job of "
                         "its own (task leasehold.bulk), admitted like a submission, that "
                         "pages through the matches oldest first with fenced conditional "
                         "writes, checkpoints its progress and resumes after a failure. "
                         "Both act only on jobs created up to the request (created_before). "
                         "A delete keeps the rows something still references (a workflow's "
                         "steps, a live durable job's children) and counts them apart. "
                         "Retries and redrives are admitted like submissions. " + COST_NOTE
                         + ".",
             responses={200: {"description": "the dry run's count",
                              "content": {"application/json": {"model": BulkPreview}}},
                        202: {"description": "the bulk job, started",
                              "content": {"application/json": {"model": BulkJob}}},
                        **errors(400, 401, 422, 429, 503)})
def bulk_action(body: BulkIn) -> Response[Any]:
    app, api, tenant = context.leasehold(router), context.config(router), context.tenant(router)
    # Bounded by the request: jobs submitted after it, while it runs, are never touched.
    where = run.bounded(body.filter.to_filter(), app.now())
    run.effective(where, body.action)  # a bad combination is a 422 before anything runs
    if body.dry_run:
        count, complete, sample, kept = run.preview(app, tenant, body.action, where)
        return Response(status_code=200, content_type=content_types.APPLICATION_JSON,
                        body=BulkPreview(action=body.action, matches=count, complete=complete,
                                         sample=sample, created_before=iso(where.created_before),
                                         skipped_referenced=sum(kept.referenced_by.values()),
                                         referenced_by=kept.referenced_by))
    spec = JobSpec(task=run.TASK, tenant=tenant, labels={"bulk": body.action},
                   payload={"action": body.action,
                            "filter": run.filter_to_payload(where)})
    result = submit_admitted(app, spec, run.pool(app), api.limits_for(app, tenant),
                             api.backlog, api.buckets, internal=True)
    return Response(status_code=202, content_type=content_types.APPLICATION_JSON,
                    body=bulk_view(result.job, app.now()))


BulkId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[0-9A-Za-z]+$")]


@router.get("/jobs/bulk/<bulk_id>", summary="A bulk action's progress", tags=["jobs"],
            description="The bulk job: its progress (done, skipped, skipped_referenced by "
                        "reason, where it resumes) while it runs, its result when finished, "
                        "and its bound (created_before).",
            responses=answers(BulkJob, 401, 404, 422))
def bulk_progress(bulk_id: BulkId) -> BulkJob:
    app = context.leasehold(router)
    job = control.get_job(app, bulk_id, context.tenant(router))
    if job.task != run.TASK:
        raise NotFound(f"no bulk action {bulk_id}", job_id=bulk_id)
    return bulk_view(job, app.now())
