"""The API's request and response bodies (pydantic: validation and the OpenAPI document).

These models check shape and types only; the domain (:mod:`leasehold.core.spec`) owns every rule
about values (known task, pools, control characters, sizes), so the rules live in one place.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
)

from leasehold.core.durations import MIN_SECONDS
from leasehold.core.retention import MAX_RETENTION_DAYS
from leasehold.core.spec import (
    CONTROL_CHARS,
    MAX_PAYLOAD_BYTES,
    MAX_RESULT_BYTES,
    NAME_PATTERN,
    POOL_PATTERN,
)

Priority = Literal["high", "normal", "low"]
StateName = Literal["SCHEDULED", "WAITING", "QUEUED", "RUNNING", "SUCCEEDED", "DEAD", "CANCELLED",
                    "EXPIRED", "SLEEPING"]


class _Strict(BaseModel):
    # Unknown fields are mistakes (a misspelt "priorty" must not be silently ignored), and
    # so are wrong JSON types: "10" is not a number, true is not 1 (pydantic's strict mode).
    model_config = ConfigDict(extra="forbid", strict=True)


#: The start of an RFC 3339 date-time (the schema's ``format: date-time``).
_ISO_START = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _iso_text(value: object) -> object:
    # pydantic would read a number, or a string of digits ("1700000000"), as epoch seconds.
    if not isinstance(value, str) or not _ISO_START.match(value):
        raise ValueError("must be an ISO-8601 string with a zone, e.g. 2027-01-01T09:00:00Z")
    return value


#: A time as JSON or a query gives it: an ISO-8601 string with a zone (strict mode alone
#: would refuse every string, since JSON has no time type; a number is refused, not read as
#: epoch).
IsoTime = Annotated[AwareDatetime, Field(strict=False), BeforeValidator(_iso_text)]

#: Text without control characters: the domain refuses them in every text field
#: (``leasehold.core.spec.check_text``), and the schema says so.
TEXT = f"^[^{CONTROL_CHARS}]*$"
#: A task's name, a label's name (at most 64 characters) and a pool, as the domain checks them.
TaskName = Annotated[str, Field(min_length=1, max_length=128, pattern=NAME_PATTERN)]
PoolName = Annotated[str, Field(min_length=1, max_length=32, pattern=POOL_PATTERN)]
MAX_LABELS = 32
_LABEL_NAME = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": NAME_PATTERN}
_LABEL_VALUE = {"type": "string", "maxLength": 256, "pattern": TEXT}
#: At most 32 labels, each name a name and each value text. (pydantic would state the
#: name's pattern as ``patternProperties``, which lets any other name through.)
Labels = Annotated[
    dict[Annotated[str, Field(min_length=1, max_length=64, pattern=NAME_PATTERN)],
         Annotated[str, Field(max_length=256, pattern=TEXT)]],
    Field(max_length=MAX_LABELS),
    WithJsonSchema({"type": "object", "maxProperties": MAX_LABELS,
                    "propertyNames": _LABEL_NAME, "additionalProperties": _LABEL_VALUE})]
#: A flow-control key or key template (``stripe:{payload.account_id}``): at most 200
#: characters, as the key it renders is (``leasehold.core.flowcontrol.MAX_KEY_CHARS``).
FlowKey = Annotated[str, Field(min_length=1, max_length=200, pattern=TEXT)]



def _zero_or_ms(value: float) -> float:
    if 0 < value < MIN_SECONDS:
        raise ValueError(f"must be 0 or at least {MIN_SECONDS:g} (a millisecond)")
    return value


#: A duration where 0 means none is 0, or at least a millisecond (``leasehold.core.durations``:
#: a DynamoDB number cannot be smaller than 1e-130): ``Annotated[float, Field(ge=0, le=bound),
#: *ZERO_OR_MS]`` (its bounds first, so that the schema states them as numbers' bounds).
ZERO_OR_MS = (AfterValidator(_zero_or_ms), Field(json_schema_extra={
    "not": {"exclusiveMinimum": 0, "exclusiveMaximum": MIN_SECONDS}}))
Backoff = Annotated[float, Field(ge=0, le=86_400), *ZERO_OR_MS]

PAYLOAD_LIMITS = (
    f"Any JSON, at most {MAX_PAYLOAD_BYTES // 1024} KB serialized (a workflow step's: 128 KB). "
    f"The task's result is limited to {MAX_RESULT_BYTES // 1024} KB: a larger one fails "
    "the job, so pass a reference (an S3 key) to large data instead.")


class RetryIn(_Strict):
    min_backoff_seconds: Backoff | None = None
    max_backoff_seconds: Backoff | None = None
    max_retry_age_seconds: float | None = Field(default=None, ge=MIN_SECONDS, le=366 * 86_400)
    non_retryable: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = Field(
        default_factory=list, max_length=32, description="exception class names")


class UniqueIn(_Strict):
    key: FlowKey = Field(examples=["import:{payload.file}"],
                         description="while a job with this key is live, a submission with "
                                     "it answers that job (200, duplicate); {payload.x} takes "
                                     "a payload field")


class DebounceIn(_Strict):
    key: FlowKey = Field(examples=["rebuild:{payload.doc}"])
    seconds: float = Field(ge=MIN_SECONDS, le=900, description="runs this long after the last "
                                                               "submission with the key")
    max_wait_seconds: float | None = Field(
        default=None, ge=MIN_SECONDS, le=86_400,
        description="and never later than this after the first (at least `seconds`)")


class ConcurrencyIn(_Strict):
    key: FlowKey = Field(examples=["stripe:{payload.account_id}"],
                         description="a key, or a template over the payload; scoped to you")
    limit: int = Field(ge=1, le=10_000)


class ThrottleIn(_Strict):
    key: FlowKey
    limit: int = Field(ge=1, le=10_000, description="starts per period")
    period_seconds: float = Field(ge=MIN_SECONDS, le=86_400)
    burst: int | None = Field(default=None, ge=1, le=10_000,
                              description="starts allowed at once (default: limit)")


class SubmitJob(_Strict):
    task: TaskName | None = Field(default=None, examples=["echo"],
                                  description="the registered task to run; or give `target`")
    target: dict[str, Any] | None = Field(
        default=None, min_length=1, max_length=1,
        description="a job with no code, instead of `task` (never both), of exactly one "
                    "kind: "
                    '`{"http": {"url", "method", "headers", "body", "timeout_seconds", '
                    '"success", "auth", "follow_redirects", "response_headers"}}` or '
                    '`{"aws": {"service", "action", "parameters"}}`; see the README, '
                    '"Jobs with no code"',
        examples=[{"http": {"url": "https://api.partner.example/v1/orders", "method": "POST",
                            "body": {"id": 7}}}])
    payload: Any = Field(default=None, description=PAYLOAD_LIMITS)
    priority: Priority | None = None
    pool: PoolName | None = None
    delay_seconds: float | None = Field(default=None, ge=0, le=366 * 86_400)
    run_at: IsoTime | None = Field(
        default=None, description="When to run (ISO-8601 with a time zone), up to a year "
                                  "ahead; a time in the past runs now, and the answer's "
                                  "warnings say so")
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=256, pattern=TEXT)
    max_attempts: int | None = Field(default=None, ge=1, le=100)
    timeout_seconds: float | None = Field(default=None, ge=1, le=86_400)
    retry: RetryIn | None = None
    labels: Labels = Field(default_factory=dict)
    unique: UniqueIn | None = None
    debounce: DebounceIn | None = None
    start_within_seconds: float | None = Field(
        default=None, ge=MIN_SECONDS, le=366 * 86_400,
        description="not started this long after its run_at, the job ends EXPIRED")
    expires_at: IsoTime | None = Field(
        default=None, description="not started by then, the job ends EXPIRED")
    retention_days: int | None = Field(
        default=None, ge=0, le=MAX_RETENTION_DAYS,
        description="days the finished job is kept before DynamoDB deletes it (0: forever); "
                    "default: the stack's retentionDays (30)")
    concurrency: ConcurrencyIn | None = Field(
        default=None, description="at most `limit` jobs with this key RUNNING at once; "
                                  "the others wait, parked (overrides the task's default)")
    throttle: ThrottleIn | None = Field(
        default=None, description="at most `limit` starts per `period_seconds` with this "
                                  "key; the others are delayed, never dropped")
    deadline_seconds: float | None = Field(
        default=None, ge=1, le=366 * 86_400,
        description="bounds the whole job from submission: all its attempts, and a durable "
                    "job's sleeps and waits (timeout_seconds bounds one attempt)")


class JobErrorOut(BaseModel):
    type: str
    message: str
    traceback: str = ""


class AttemptErrorOut(BaseModel):
    attempt: int
    type: str
    message: str


class TransitionOut(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    at: str
    from_: str | None = Field(alias="from")
    to: str
    by: str
    reason: str = ""
    code_version: str | None = Field(
        default=None, description="on a lease's entry: the code version the attempt ran on")


class ChildOut(BaseModel):
    name: str = Field(description="the call site's name (``ctx.spawn(name=...)``)")
    job_id: str
    task: str | None = None
    state: StateName | None = Field(default=None, description="null if the row is gone")
    on_parent_end: str
    own: bool = Field(description="false when another live job answered the spawn (a "
                                  "unique key's holder, a debounce window): not cancelled "
                                  "with the parent")


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
    due_in_seconds: float | None = Field(
        default=None, description="seconds until run_at while the job waits for it (SCHEDULED, "
                                  "or QUEUED with a delayed hand-off, e.g. a schedule's next "
                                  "runs); null once it is due")
    sleeping_until: str | None = Field(
        default=None, description="a durable job asleep (SLEEPING): when it runs again at "
                                  "the latest")
    waiting: str | None = Field(default=None, description="what a SLEEPING job waits for: "
                                "sleep, callback:<name>, children, or admission (a spawn "
                                "over its tenant's live-job cap)")
    started_at: str | None = None
    finished_at: str | None = None
    cancel_requested: bool = False
    paused: bool = Field(default=False, description="paused by POST /jobs/{id}/pause: it "
                         "does not start until POST /jobs/{id}/resume")
    waiting_for: str | None = Field(
        default=None, description="why a live job does not start yet: paused, a reset "
                                  "under way, or its flow control (a full or paused "
                                  "concurrency key, a throttle)")
    result: Any = Field(default=None, description=f"at most {MAX_RESULT_BYTES // 1024} KB "
                                                  "serialized")
    error: JobErrorOut | None = None
    attempt_errors: list[AttemptErrorOut] = Field(
        default_factory=list, description="the errors of the last failed attempts, oldest "
                                          "first; kept after a retry succeeds")
    progress: Any = None
    history: list[TransitionOut] = Field(default_factory=list)
    flow: dict[str, Any] | None = Field(
        default=None, examples=[{"concurrency": {"key": "acct-9", "limit": 1},
                                 "unique": {"key": "import:file-1"},
                                 "start_by": "2026-11-26T08:00:00.000Z"}],
        description="the flow control the job runs under, when it uses any: its "
                    "`concurrency` and `throttle` (keys rendered from their templates), its "
                    "`unique` and `debounce` keys, and `start_by`, when it ends EXPIRED if "
                    "not started")
    retention_days: int | None = Field(default=None, description="the job's own retention, "
                                       "if it asked for one at submission")
    retained_until: str | None = Field(
        default=None, description="when DynamoDB may delete this finished job (its TTL; "
                                  "deletion follows within a few days); null while it is live "
                                  "or kept forever")
    parent_id: str | None = Field(default=None, description="the durable job that spawned "
                                  "this one (``ctx.spawn``)")
    on_parent_end: str | None = Field(default=None, description="a child's policy when its "
                                      "parent ends: `cancel` (the default) or `abandon`")
    children: list[ChildOut] | None = Field(
        default=None, description="the jobs it spawned (``ctx.spawn``) with their states, the "
                                  "first 100 by call-site name; only on GET /jobs/{id}")
    more_children: bool | None = Field(default=None, description="it spawned more children "
                                       "than `children` shows")


class ResetJob(BaseModel):
    model_config = ConfigDict(extra="forbid")

    from_step: str = Field(min_length=1, max_length=256, examples=["charge"],
                           description="the step (``ctx.step`` name) to run again from: its "
                                       "records and every later one are dropped")


class SubmittedJob(JobOut):
    warnings: list[str] = Field(
        default_factory=list,
        description="what the API did differently from what was asked, e.g. a run_at in "
                    "the past: the job runs now")
    duplicate: bool = Field(default=False, description="a live job with the same unique key "
                                                      "answered: this is that job")
    coalesced: bool = Field(default=False, description="debounced: this job carries the "
                                                      "submission, with its payload")


class JobPage(BaseModel):
    jobs: list[JobOut]
    #: Pass as ``cursor`` to get the next page; null on the last page.
    next_cursor: str | None = None


class ErrorDetail(BaseModel):
    code: str
    message: str
    field: str | None = None
    #: ``421 misdirected`` only: the tenant's home Region, and its cell's API URL (also in
    #: the ``Leasehold-Home-Url`` header), where to submit instead.
    home: str | None = None
    home_url: str | None = None


class ErrorOut(BaseModel):
    error: ErrorDetail
