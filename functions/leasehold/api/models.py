"""The API's request and response bodies (pydantic: validation and the OpenAPI document).

These models check shape and types only; the domain (:mod:`leasehold.core.spec`) owns every rule
about values (known task, pools, control characters, sizes), so the rules live in one place.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

Priority = Literal["high", "normal", "low"]
StateName = Literal["SCHEDULED", "WAITING", "QUEUED", "RUNNING", "SUCCEEDED", "DEAD", "CANCELLED"]


class _Strict(BaseModel):
    # Unknown fields are mistakes (a misspelt "priorty" must not be silently ignored).
    model_config = ConfigDict(extra="forbid")


class RetryIn(_Strict):
    min_backoff_seconds: float | None = Field(default=None, ge=0, le=86_400)
    max_backoff_seconds: float | None = Field(default=None, ge=0, le=86_400)
    max_retry_age_seconds: float | None = Field(default=None, gt=0, le=366 * 86_400)
    non_retryable: list[str] = Field(default_factory=list, max_length=32)


class SubmitJob(_Strict):
    task: str = Field(min_length=1, max_length=128, examples=["echo"])
    payload: Any = None
    priority: Priority | None = None
    pool: str | None = Field(default=None, min_length=1, max_length=32)
    delay_seconds: float | None = Field(default=None, ge=0, le=366 * 86_400)
    run_at: AwareDatetime | None = Field(
        default=None, description="When to run (ISO-8601 with a time zone); the past means now")
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=256)
    max_attempts: int | None = Field(default=None, ge=1, le=100)
    timeout_seconds: float | None = Field(default=None, ge=1, le=86_400)
    retry: RetryIn | None = None
    labels: dict[str, str] = Field(default_factory=dict, max_length=32)


class JobErrorOut(BaseModel):
    type: str
    message: str
    traceback: str = ""


class TransitionOut(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    at: str
    from_: str | None = Field(alias="from")
    to: str
    by: str
    reason: str = ""


class JobOut(BaseModel):
    # Other features add attributes to the job view (schedule_id, workflow_id, ...).
    model_config = ConfigDict(extra="allow")

    job_id: str
    tenant: str
    task: str
    state: StateName
    pool: str
    priority: Priority
    payload: Any = None
    attempts: int
    max_attempts: int
    crash_recoveries: int = 0
    idempotency_key: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    created_at: str
    run_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    cancel_requested: bool = False
    result: Any = None
    error: JobErrorOut | None = None
    progress: Any = None
    history: list[TransitionOut] = Field(default_factory=list)


class JobPage(BaseModel):
    jobs: list[JobOut]
    #: Pass as ``cursor`` to get the next page; null on the last page.
    next_cursor: str | None = None


class RedriveIn(_Strict):
    pool: str = Field(default="default", min_length=1, max_length=32)
    task: str | None = Field(default=None, min_length=1, max_length=128)
    limit: int = Field(default=100, ge=1, le=1000)


class RedriveOut(BaseModel):
    redriven: list[str]
    #: DLQ copies removed because their job was no longer DEAD (already retried or redriven).
    stale_removed: int = 0


class WorkerOut(BaseModel):
    worker_id: str
    pool: str
    host: str
    pid: int
    started_at: str
    last_heartbeat: str
    current_jobs: list[str] = Field(default_factory=list)
    processed: int = 0


class WorkersOut(BaseModel):
    workers: list[WorkerOut]


class QueueStats(BaseModel):
    pool: str
    priority: Priority
    queue: str
    visible: int
    in_flight: int
    delayed: int
    dead_letters: int
    #: From CloudWatch's ApproximateAgeOfOldestMessage where available (null locally).
    oldest_age_seconds: float | None = None


class StatsOut(BaseModel):
    tenant: str
    jobs: dict[str, int]
    live: int
    queues: list[QueueStats]


class Health(BaseModel):
    status: Literal["ok"]
    time: str


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None


class ErrorOut(BaseModel):
    error: ErrorDetail
