"""Routes for jobs: submit, inspect, list, cancel, retry."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query

from leasehold.api import context, search
from leasehold.api.answers import answers, decode_cursor, encode_cursor, errors, links, view
from leasehold.api.models import (
    ChildOut,
    IsoTime,
    JobOut,
    JobPage,
    Priority,
    ResetJob,
    StateName,
    SubmitJob,
    SubmittedJob,
)
from leasehold.api.submissions import submit_one
from leasehold.core.jobs import Job
from leasehold.core.spec import NAME_PATTERN, POOL_PATTERN
from leasehold.core.states import JobState
from leasehold.durable import children, patches
from leasehold.durable.reset import reset
from leasehold.lifecycle import control, pausing, tracebacks
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy.admission import retry_admitted
from leasehold.tenancy.listing import list_jobs
from leasehold.time import schedules

router = Router()


JobId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[0-9A-Za-z]+$")]


@router.post(
    "/jobs", summary="Submit a job", status_code=201, tags=["jobs"],
    responses={201: {"description": "created",
                     "content": {"application/json": {"model": SubmittedJob}},
                     "links": links("job_id", "$response.body#/job_id",
                                    "GET /jobs/{job_id}", "DELETE /jobs/{job_id}",
                                    "POST /jobs/{job_id}/retry", "GET /jobs/{job_id}/steps")},
               200: {"description": "idempotent replay (the job the first submission made), "
                                    "a duplicate of a live unique job, or a debounced "
                                    "submission coalesced into the job that carries it",
                     "content": {"application/json": {"model": SubmittedJob}}},
               **errors(400, 401, 409, 413, 422, 429, 503)},
)
def submit_job(
    body: SubmitJob,
    idempotency_key: Annotated[str | None, Header(
        alias="Idempotency-Key", max_length=256,
        description="a retry token the client made up (`leasehold.client` sends one): a "
                    "submission sent again with the same token makes one job, as with "
                    "`idempotency_key` (which wins when both are given); a debounced "
                    "submission ignores it, since a repeat joins the window that carried it"
    )] = None,
) -> Response[SubmittedJob]:
    app, api = context.leasehold(router), context.config(router)
    status, shown = submit_one(app, api, context.tenant(router), body, idempotency_key)
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON,
                    body=shown)


#: The longest a ``GET /jobs/{id}?wait_seconds=`` holds its answer: API Gateway gives up on
#: an integration after 29 s, and the API function's own timeout is 29 s.
MAX_WAIT_SECONDS = 20.0
#: Between two reads of a waited-on job: 50 ms growing by half up to 0.5 s, so a short job
#: is seen finished within ~50 ms and a long wait costs about 2 reads a second.
FIRST_PAUSE_SECONDS, MAX_PAUSE_SECONDS = 0.05, 0.5


def await_job(app: Leasehold, job_id: str, tenant: str, wait_seconds: float) -> Job:
    """The job once it is finished, or as it is after ``wait_seconds`` (a long poll).

    Re-reads the row (one strongly consistent GetItem) with a growing pause, on the app's
    clock: a 20 s wait for a job that does not finish costs about 45 reads, against the ~40
    requests (each an API call and a read) a client polling twice a second would make.
    """
    job = control.get_job(app, job_id, tenant)
    deadline = app.now() + int(wait_seconds * 1000)
    pause = FIRST_PAUSE_SECONDS
    while not job.state.terminal and (left := deadline - app.now()) > 0:
        app.clock.sleep(min(pause, left / 1000))
        pause = min(pause * 1.5, MAX_PAUSE_SECONDS)
        job = control.get_job(app, job_id, tenant)
    return job


@router.get("/jobs/<job_id>", summary="Get a job", tags=["jobs"],
            responses=answers(JobOut, 400, 401, 404, 422))
def get_job(
    job_id: JobId,
    wait_seconds: Annotated[float, Query(
        ge=0, le=MAX_WAIT_SECONDS,
        description="hold the answer until the job is finished (SUCCEEDED, DEAD or "
                    "CANCELLED) or this many seconds have passed: a long poll")] = 0,
) -> JobOut:
    app = context.leasehold(router)
    tenant = context.tenant(router)
    job = await_job(app, job_id, tenant, wait_seconds)
    # The row keeps an excerpt of its last error; the whole of it is in its own item.
    shown = view(dataclasses.replace(job, error=tracebacks.full_error(app, job)), app.now())
    family = children.shown(app, job)  # a durable parent's children, bounded
    if family is not None:
        shown.children = [ChildOut.model_validate(child) for child in family[0]]
        shown.more_children = family[1]
    return shown


#: A job listing's position (the tenant is the caller's, never in the cursor).
JOB_CURSOR = {"created_at": int, "job_id": str}
#: A schedule's runs, from the ``by_schedule`` index.
RUN_CURSOR = {"schedule_id": str, "scheduled_for": str, "job_id": str}


def jobs_page(app: Leasehold, tenant: str, schedule_id: str, *, limit: int,
              cursor: str | None, states: set[JobState] | None = None) -> JobPage:
    """``GET /jobs?schedule_id=``: the schedule's runs, newest scheduled time first.

    ``states`` filters the page of ``limit`` runs (it may hold fewer; follow the cursor).
    """
    schedules.get(app, schedule_id, tenant)  # another tenant's schedule is a 404
    after = decode_cursor(cursor, RUN_CURSOR) if cursor else None
    ids, last = schedules.job_ids(app, schedule_id, limit=limit, cursor=after)
    jobs = [j for j in app.store.batch_get(ids) if j.tenant == tenant
            and (not states or j.state in states)]
    now = app.now()
    return JobPage(jobs=[view(j, now) for j in jobs],
                   next_cursor=encode_cursor(last, RUN_CURSOR))


@router.get("/jobs", summary="List and search your jobs, newest first", tags=["jobs"],
            description="Filters combine (all must hold). " + search.COST_NOTE + ".",
            responses=answers(JobPage, 400, 401, 404, 422))  # 404: an unknown schedule_id
def list_my_jobs(
    state: Annotated[list[StateName] | None, Query(description="repeat for several")] = None,
    task: Annotated[str | None, Query(min_length=1, max_length=128,
                                      pattern=NAME_PATTERN)] = None,
    pool: Annotated[str | None, Query(min_length=1, max_length=32, pattern=POOL_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(min_length=1, max_length=512)] = None,
    schedule_id: Annotated[str | None, Query(
        min_length=1, max_length=64, pattern=r"^[0-9A-Za-z]+$",
        description="only this schedule's runs (404 if you have no such schedule)")] = None,
    label: Annotated[list[search.LabelFilter] | None, Query(description=search.LABEL_HELP)
                     ] = None,
    created_after: Annotated[IsoTime | None, Query(
        description="created at or after this ISO-8601 time (uses the index)")] = None,
    created_before: Annotated[IsoTime | None, Query(
        description="created before this ISO-8601 time (uses the index)")] = None,
    error_type: Annotated[str | None, Query(
        min_length=1, max_length=128,
        description="the last error's class or one of its bases, e.g. TimeoutError")] = None,
    error_prefix: Annotated[str | None, Query(
        min_length=1, max_length=256,
        description="the last error's message starts with this")] = None,
    id_prefix: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    code_version: Annotated[str | None, Query(
        min_length=1, max_length=64, pattern=r"^[0-9A-Za-z._:-]+$",
        description="the code version that first ran the job")] = None,
    patch: Annotated[str | None, Query(
        min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$",
        description="live durable jobs that may still take the old branch of "
                    "ctx.patched(<patch>): safe to deprecate the patch when none is left "
                    "(reads each live job's records)")] = None,
) -> JobPage:
    app = context.leasehold(router)
    tenant = context.tenant(router)
    if schedule_id is not None:
        return jobs_page(app, tenant, schedule_id, limit=limit, cursor=cursor,
                         states={JobState(s) for s in state or ()})
    where = search.job_filter(states=state, task=task, pool=pool, label=label,
                              error_type=error_type, error_prefix=error_prefix,
                              id_prefix=id_prefix, created_after=created_after,
                              created_before=created_before, code_version=code_version)
    if patch is not None:
        where = dataclasses.replace(where, also=patches.needs(app, patch))
    after = decode_cursor(cursor, JOB_CURSOR) | {"tenant": tenant} if cursor else None
    jobs, position = list_jobs(app, tenant, limit=limit, where=where, after=after)
    now = app.now()
    return JobPage(jobs=[view(j, now) for j in jobs],
                   next_cursor=encode_cursor(position, JOB_CURSOR))


@router.delete("/jobs/<job_id>", summary="Cancel a job", tags=["jobs"],
               responses=answers(JobOut, 400, 401, 404, 409, 422))
def cancel_job(job_id: JobId) -> JobOut:
    app = context.leasehold(router)
    return view(control.cancel(app, job_id, context.tenant(router)))


@router.post("/jobs/<job_id>/retry", summary="Re-run a DEAD or CANCELLED job", tags=["jobs"],
             description="Admitted like a submission: over your rate or live-job limit it "
                         "answers 429 and the job stays as it was.",
             responses=answers(JobOut, 400, 401, 404, 409, 422, 429, 503))
def retry_job(job_id: JobId) -> JobOut:
    app, api = context.leasehold(router), context.config(router)
    tenant = context.tenant(router)
    return view(retry_admitted(app, job_id, tenant, api.limits_for(app, tenant), api.backlog,
                               api.buckets))


@router.post("/jobs/<job_id>/pause", summary="Pause a job", tags=["jobs"],
             description="A paused job does not start until it is resumed: a QUEUED, "
                         "SCHEDULED, SLEEPING or WAITING one stays so, holding no lease "
                         "and no concurrency slot; a RUNNING one finishes its attempt and "
                         "is held before the next. A start window that passes meanwhile "
                         "ends it EXPIRED. Pausing a paused job answers it as it is; a "
                         "finished one is a 409.",
             responses=answers(JobOut, 400, 401, 404, 409, 422))
def pause_job(job_id: JobId) -> JobOut:
    app = context.leasehold(router)
    return view(pausing.pause(app, job_id, context.tenant(router)), app.now())


@router.post("/jobs/<job_id>/resume", summary="Resume a paused job", tags=["jobs"],
             description="Lifts the pause and hands a waiting job off again; a job that is "
                         "not paused is answered as it is.",
             responses=answers(JobOut, 400, 401, 404, 409, 422))
def resume_job(job_id: JobId) -> JobOut:
    app = context.leasehold(router)
    return view(pausing.resume(app, job_id, context.tenant(router)), app.now())


@router.post("/jobs/<job_id>/reset", summary="Run a durable job again from a step",
             tags=["jobs"],
             description="Drops the job's records from `from_step` on (earlier steps keep "
                         "their results) and runs it again, admitted like a retry (429 over "
                         "your limits, and the job stays as it was). For a SUCCEEDED, DEAD, "
                         "CANCELLED, SLEEPING or QUEUED job; a RUNNING one is a 409, a step "
                         "it did not record a 422. Live children spawned from that step on "
                         "are cancelled and spawned again by the re-run; earlier ones are "
                         "kept.",
             responses=answers(JobOut, 400, 401, 404, 409, 422, 429, 503))
def reset_job(job_id: JobId, body: ResetJob) -> JobOut:
    app, api = context.leasehold(router), context.config(router)
    tenant = context.tenant(router)

    def rerun(job: Job, writes: Any, remove: Any, reason: str) -> Job:
        return retry_admitted(app, job.job_id, tenant, api.limits_for(app, tenant),
                              api.backlog, api.buckets, job=job, writes=writes,
                              remove=remove, reason=reason)

    return view(reset(app, job_id, tenant, body.from_step, rerun), app.now())


__all__ = ["Priority", "router"]
