"""Routes for workers in any language (issue 34): lease, heartbeat, complete, fail.

The normative protocol is docs/protocol.md (version :data:`PROTOCOL`); these routes' OpenAPI
text (tag ``workers``, :data:`TAG`) agrees with it.

Thin: the protocol is :mod:`leasehold.remote`. Who may call them is a worker, never a
tenant's API caller: behind API Gateway an IAM principal granted a pool
(``LEASEHOLD_WORKER_MAP``, written by ``jobs.pool(name).grant_lease(role)``); locally (the
tenant header is trusted) any caller, as for the rest of the local API.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.models import Tag
from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import BaseModel, Field

from leasehold.api import context
from leasehold.api.answers import answers, view
from leasehold.api.models import JobOut
from leasehold.api.principals import principal_of
from leasehold.clock import iso
from leasehold.core.jobs import Job
from leasehold.core.spec import NAME_PATTERN, POOL_PATTERN
from leasehold.errors import NotFound
from leasehold.remote import finishing, hangup, leasing
from leasehold.tracing.carrier import TRACE

router = Router()

#: The worker protocol's version (docs/protocol.md): sent by workers, answered by the server.
PROTOCOL = 1
#: The normative specification these routes' texts link to, section by section
#: (``SPEC + "#routes"``: a GitHub heading anchor of docs/protocol.md).
SPEC = "docs/protocol.md"
#: The ``workers`` tag of the OpenAPI document.
TAG = Tag(name="workers", description=(
    "Workers in any language: lease, heartbeat, complete, fail. The normative specification "
    f"is [{SPEC}]({SPEC}) (protocol version {PROTOCOL}); where this schema is silent, it "
    f"decides: status codes and retries ({SPEC}#routes: 5xx and lost answers retried with "
    "backoff, 429/503 after Retry-After when sent), lease length and heartbeat interval "
    f"({SPEC}#lease-length-and-heartbeats: a third of the time left), trace context "
    f"({SPEC}#trace-context), cancellation ({SPEC}#cancellation), timeouts "
    f"({SPEC}#timeouts), sizes ({SPEC}#sizes), idempotent finishes "
    f"({SPEC}#idempotent-finishes), long polls and shutdown "
    f"({SPEC}#stopping-during-a-long-poll-and-shutting-down)."))

JobId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[0-9A-Za-z]+$")]


class LeaseRequest(BaseModel):
    pool: str = Field(pattern=POOL_PATTERN, max_length=64)
    tasks: list[Annotated[str, Field(pattern=NAME_PATTERN, max_length=128)]] | None = Field(
        default=None, max_length=100,
        description="only these tasks of the pool (absent or empty: every task of the pool; "
                    "a name the pool does not have leases nothing)")
    max_jobs: int = Field(default=1, ge=1, le=leasing.MAX_JOBS,
                          description="at most this many jobs (fewer may come, even when "
                                      "more are queued)")
    wait_seconds: float = Field(
        default=leasing.MAX_WAIT_SECONDS, ge=0, le=leasing.MAX_WAIT_SECONDS,
        description="long poll: answer at the first job, or with none after this long")
    worker_id: str = Field(default="remote", min_length=1, max_length=128,
                           pattern=r"^[A-Za-z0-9._@/-]+$",
                           description="the worker process, unique to it (GET /workers lists "
                                       "workers by it; fencing never depends on it)")
    protocol: int = Field(
        default=PROTOCOL, ge=1, le=PROTOCOL,
        description=f"the protocol version the worker speaks (docs/protocol.md); this "
                    f"server speaks {PROTOCOL} and refuses a later one (422). Optional: "
                    "a worker that sends none is taken to speak version 1")


class LeaseOut(BaseModel):
    token: str = Field(description="the fencing token: every heartbeat and finish carries it")
    expires_at: str = Field(description="ISO-8601 UTC (milliseconds); heartbeat at a third "
                                        "of the time left until it")


class LeasedJob(BaseModel):
    job_id: str
    task: str
    payload: Any
    attempt: int = Field(description="1 for the first attempt")
    tenant: str
    deadline_at: str | None = Field(description="the job's deadline (ISO-8601 UTC), if any")
    timeout_at: str | None = Field(
        default=None, description="when this attempt must have ended (ISO-8601 UTC): its "
        "start plus the task's timeout_seconds, or the job's deadline if earlier; past it "
        "heartbeats and finishes answer 409 and the attempt fails AttemptTimeout")
    traceparent: str | None = Field(
        default=None, description="the W3C trace context the job was submitted in (None: "
        "none): a worker that traces makes its span a child of it")
    tracestate: str | None = Field(default=None, description="its W3C tracestate, if any")
    lease: LeaseOut


class LeaseAnswer(BaseModel):
    jobs: list[LeasedJob] = Field(description="empty when wait_seconds passed with no job")
    protocol: int = Field(default=PROTOCOL,
                          description="the protocol version the server speaks")


class HeartbeatRequest(BaseModel):
    token: str = Field(min_length=1, max_length=4096)
    progress: Any = Field(default=None, description="any JSON, up to 16 KiB (over it: 413, "
                          "the lease not extended), shown on the job until another is sent")


class HeartbeatAnswer(BaseModel):
    expires_at: str = Field(description="the lease's new end (never past the attempt's "
                                        "timeout_at); heartbeat again at a third of what is left")
    cancel_requested: bool = Field(
        description="true: a cancel was requested and this heartbeat ended the job CANCELLED: "
                    "stop the job and report nothing (a report is answered 200 with the "
                    "CANCELLED job)")


class CompleteRequest(BaseModel):
    token: str = Field(min_length=1, max_length=4096)
    result: Any = None


class ErrorIn(BaseModel):
    type: str = Field(min_length=1, max_length=256,
                      description="a name (DiskFull); NonRetryableError, PayloadTooLarge or a "
                                  "name in the retry policy's non_retryable is final")
    message: str = Field(default="", max_length=64 * 1024)


class FailRequest(BaseModel):
    token: str = Field(min_length=1, max_length=4096)
    error: ErrorIn
    retryable: bool = Field(default=True,
                            description="false: DEAD at once, whatever the retry policy")


class WorkerForbidden(context.Forbidden):
    """The caller may not work on this pool's jobs (grant it with ``grant_lease``)."""




def trace_of(job: Job) -> dict[str, str]:
    """The job's trace context as the row keeps it (``tracing.carrier``: tp, ts)."""
    found = job.extra.get(TRACE)
    return {k: str(v) for k, v in found.items() if k in ("tp", "ts")} \
        if isinstance(found, Mapping) else {}


def allowed_pools(event: Mapping[str, Any], api: context.ApiConfig) -> frozenset[str] | None:
    """The pools the caller may work on; None: any (the local runtime)."""
    if api.trust_tenant_header:
        return None
    request = event.get("requestContext") or {}
    authorizer = request.get("authorizer") or {}
    identity = request.get("identity") or {}
    arn = identity.get("userArn") or (authorizer.get("iam") or {}).get("userArn")
    principal = principal_of(str(arn)) if arn else None
    if principal is None:
        raise WorkerForbidden()
    return api.workers.get(principal, frozenset())


def _check(pool: str) -> None:
    pools = allowed_pools(router.current_event.raw_event, context.config(router))
    if pools is not None and pool not in pools:
        raise WorkerForbidden(f"this caller may not work on pool {pool!r}")


def _check_job(job_id: str) -> None:
    app = context.leasehold(router)
    pools = allowed_pools(router.current_event.raw_event, context.config(router))
    if pools is None:
        return
    try:
        pool = app.store.get(job_id).pool
    except NotFound:
        raise WorkerForbidden() from None  # never say which jobs exist
    if pool not in pools:
        raise WorkerForbidden(f"this caller may not work on pool {pool!r}")


@router.post("/workers/lease", summary="Lease jobs of a pool (long poll)", tags=["workers"],
             description="Up to max_jobs of an external pool's jobs (any other pool: 422), in "
                         "priority order and fairly between tenants, with flow control "
                         "applied as for Python workers. Do not abort the request: run or "
                         f"fail what it answers ({SPEC}#stopping-during-a-long-poll-and-"
                         f"shutting-down). Fields, codes and retries: {SPEC}#routes.",
             responses=answers(LeaseAnswer, 401, 403, 422))
def lease_jobs(body: LeaseRequest) -> LeaseAnswer:
    app = context.leasehold(router)
    _check(body.pool)
    leased = leasing.lease(app, pool=body.pool, tasks=body.tasks, max_jobs=body.max_jobs,
                           wait_seconds=body.wait_seconds, worker_id=body.worker_id,
                           gone=hangup.client_gone())
    return LeaseAnswer(jobs=[LeasedJob(
        job_id=item.job.job_id, task=item.job.task, payload=json.loads(item.job.payload_json),
        attempt=item.job.attempt, tenant=item.job.tenant,
        deadline_at=iso(finishing.deadline_of(item.job)),
        timeout_at=iso(finishing.timeout_of(item.job)),
        traceparent=trace_of(item.job).get("tp"), tracestate=trace_of(item.job).get("ts"),
        lease=LeaseOut(token=item.token, expires_at=iso(item.job.lease_expires_at) or ""))
        for item in leased])


@router.post("/jobs/<job_id>/heartbeat", summary="Extend a remote worker's lease",
             tags=["workers"],
             description="409 lease_lost: stop the job, report nothing (the lease was taken "
                         "over, the job ended, or the attempt is past its timeout_at: the "
                         "message says which). cancel_requested: the job is now CANCELLED "
                         f"({SPEC}#cancellation). Heartbeat at a third of the time left "
                         f"({SPEC}#lease-length-and-heartbeats); never extended past "
                         f"timeout_at ({SPEC}#timeouts).",
             responses=answers(HeartbeatAnswer, 401, 403, 404, 409, 422))
def heartbeat_job(job_id: JobId, body: HeartbeatRequest) -> HeartbeatAnswer:
    _check_job(job_id)
    beat = finishing.heartbeat(context.leasehold(router), job_id, body.token, body.progress)
    return HeartbeatAnswer(expires_at=iso(beat.expires_at) or "",
                           cancel_requested=beat.cancel_requested)


@router.post("/jobs/<job_id>/complete", summary="Report a remote job's result (fenced)",
             tags=["workers"],
             description="A zombie's token answers 409 lease_lost and changes nothing; a "
                         "repeat with the same token answers the job as recorded (200). A "
                         "result over 64 KiB ends the attempt PayloadTooLarge (never retried) "
                         "and answers 413; on any 413 report fail PayloadTooLarge "
                         f"({SPEC}#sizes, {SPEC}#idempotent-finishes). Sent while a cancel "
                         "is pending: 200 with the CANCELLED job, the result not kept.",
             responses=answers(JobOut, 401, 403, 404, 409, 413, 422))
def complete_job(job_id: JobId, body: CompleteRequest) -> JobOut:
    _check_job(job_id)
    return view(finishing.complete(context.leasehold(router), job_id, body.token, body.result))


@router.post("/jobs/<job_id>/fail", summary="Report a remote job's failure (fenced)",
             tags=["workers"],
             description="Retried by the job's policy unless retryable is false (or the "
                         "type is PayloadTooLarge or NonRetryableError, or the policy's "
                         "non_retryable names it); a zombie's token answers 409 lease_lost; "
                         "a repeat with the same token answers the job as recorded (200) "
                         f"({SPEC}#idempotent-finishes).",
             responses=answers(JobOut, 401, 403, 404, 409, 422))
def fail_job(job_id: JobId, body: FailRequest) -> JobOut:
    _check_job(job_id)
    return view(finishing.fail(context.leasehold(router), job_id, body.token,
                               error_type=body.error.type, message=body.error.message,
                               retryable=body.retryable))


__all__ = ["PROTOCOL", "TAG", "router"]
