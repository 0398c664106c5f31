"""The stored job: one DynamoDB item per job, its source of truth."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from typing import Any

from leasehold.clock import iso
from leasehold.core import flowcontrol, holds
from leasehold.core.policy import RetryPolicy
from leasehold.core.retention import PURGE_AT
from leasehold.core.states import JobState


@dataclass(frozen=True)
class Transition:
    at: int
    source: str
    target: str
    actor: str
    reason: str = ""
    #: On a lease's entry: the code version the attempt ran on (issue 36; "" unknown).
    version: str = ""

    def to_item(self) -> dict[str, Any]:
        return {"at": self.at, "from": self.source, "to": self.target, "by": self.actor,
                "why": self.reason, **({"v": self.version} if self.version else {})}

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Transition:
        return cls(int(item["at"]), str(item.get("from", "")), str(item["to"]),
                   str(item.get("by", "")), str(item.get("why", "")), str(item.get("v", "")))


@dataclass(frozen=True, kw_only=True)
class JobError:
    type: str
    message: str
    traceback: str = ""
    #: The class name followed by its bases', so policies can match a base class.
    types: tuple[str, ...] = ()
    #: When the failure itself says the next attempt may start (UTC epoch ms; an HTTP
    #: target's ``Retry-After``): the retry is due then, not after the policy's backoff.
    retry_at_ms: int | None = None
    #: The epoch of the attempt whose whole message and traceback are kept in an item of
    #: their own (``lifecycle.tracebacks``); the row keeps an excerpt. None: nothing kept.
    kept: int | None = None


@dataclass(frozen=True, kw_only=True)
class Job:
    job_id: str
    tenant: str
    task: str
    payload_json: str
    pool: str
    priority: str
    state: JobState
    epoch: int
    attempt: int = 0
    max_attempts: int = 5
    crash_count: int = 0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_seconds: float = 300.0
    labels: Mapping[str, str] = field(default_factory=dict)
    idempotency_key: str | None = None
    spec_hash: str = ""
    created_at: int = 0
    run_at: int = 0
    first_started_at: int | None = None
    started_at: int | None = None
    finished_at: int | None = None
    lease_owner: str | None = None
    lease_expires_at: int | None = None
    cancel_requested: bool = False
    result_json: str | None = None
    error: JobError | None = None
    progress_json: str | None = None
    history: tuple[Transition, ...] = ()
    #: Attributes other features keep on the job (schedule_id, workflow_id, ...).
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def payload(self) -> Any:
        return json.loads(self.payload_json)

    @property
    def result(self) -> Any:
        return None if self.result_json is None else json.loads(self.result_json)

    def view(self) -> dict[str, Any]:
        """The job as the API and CLI show it (JSON-ready, times as ISO-8601 UTC)."""
        error = None
        if self.error is not None:
            error = {"type": self.error.type, "message": self.error.message,
                     "traceback": self.error.traceback}
        return {
            "job_id": self.job_id,
            "tenant": self.tenant,
            "task": self.task,
            "state": self.state.value,
            "pool": self.pool,
            "priority": self.priority,
            "payload": self.payload,
            "attempts": self.attempt,
            "max_attempts": self.max_attempts,
            "crash_recoveries": self.crash_count,
            "idempotency_key": self.idempotency_key,
            "labels": dict(self.labels),
            "created_at": iso(self.created_at),
            "run_at": iso(self.run_at),
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "cancel_requested": self.cancel_requested,
            "result": self.result,
            "error": error,
            "progress": None if self.progress_json is None else json.loads(self.progress_json),
            "history": [
                {"at": iso(t.at), "from": t.source or None, "to": t.target, "by": t.actor,
                 "reason": t.reason, **({"code_version": t.version} if t.version else {})}
                for t in self.history
            ],
            **{key: _plain(value) for key, value in self.extra.items() if key in VISIBLE_EXTRA},
            # Paused (or held by a reset under way): it does not start until lifted, and
            # its reason for waiting says so (over a flow-control wait's).
            "paused": self.extra.get(holds.PAUSED_AT) is not None,
            **({"waiting_for": why} if (why := holds.reason(self.extra)) else {}),
            # The flow control it runs under (concurrency, throttle, unique, debounce, start
            # window), when it uses any.
            **({"flow": flow} if (flow := flowcontrol.shown(self.extra)) else {}),
            # When DynamoDB may delete the finished job (its TTL); null while it is live.
            # Not ``expires_at``: that name is a job option meaning "must start by".
            "retained_until": None if PURGE_AT not in self.extra else iso(
                int(self.extra[PURGE_AT]) * 1000),
            # A durable job asleep: until when (at the latest) and for what.
            **({"sleeping_until": iso(self.run_at),
                "waiting": self.extra.get("waiting")} if self.state is JobState.SLEEPING
               else {}),
        }


#: On the row: the code version of the job's first attempt (each lease's history entry
#: keeps its own attempt's; issue 36).
CODE_VERSION = "code_version"
#: Extra attributes the API shows as they are.
VISIBLE_EXTRA = frozenset({"schedule_id", "scheduled_for", "workflow_id", "step_id",
                           "attempt_errors", "retention_days",
                           "waiting_for",  # why a QUEUED job waits (leasehold.flow)
                           "parent_id", "on_parent_end",  # a durable child's parent
                           CODE_VERSION})  # the code version that first ran it (issue 36)
#: How many failed attempts' errors a job keeps (newest last), after its last error is cleared
#: by a success: enough to see why it needed its retries, small enough for the row.
ATTEMPT_ERRORS_KEPT = 5
#: Characters of each kept attempt error's message: the row stays under 1 KB through a
#: retry (issue 46); the last error's whole message is kept apart (``lifecycle.tracebacks``).
ATTEMPT_EXCERPT = 40


def with_attempt_error(job: Job, error: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The job's kept attempt errors with this attempt's added (its traceback left out: the
    last error keeps one)."""
    kept = list(job.extra.get("attempt_errors") or ())
    kept.append({"attempt": job.attempt, "type": error.get("type", ""),
                 "message": str(error.get("message", ""))[:ATTEMPT_EXCERPT]})
    return kept[-ATTEMPT_ERRORS_KEPT:]

_FIELDS = {
    "job_id", "tenant", "task", "payload", "pool", "priority", "state", "epoch", "attempt",
    "max_attempts", "crash_count", "retry", "timeout_seconds", "labels", "idempotency_key",
    "spec_hash", "created_at", "run_at", "first_started_at", "started_at", "finished_at",
    "lease_owner", "lease_expires_at", "cancel_requested", "result", "error", "progress",
    "history",
}
#: Index keys: written by the store, never part of the domain record.
#: ``pk``: the jobs table's partition key, the home its id ends in (``core.ids``).
INDEX_KEYS = {"pk", "due_shard", "sweep_shard", "sweep_at", "tenant_shard"}


def _plain(value: Any) -> Any:
    """DynamoDB's Decimals back to int/float, recursively."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def job_from_item(item: Mapping[str, Any]) -> Job:
    """A Job from a deserialized DynamoDB item."""
    error = item.get("error")
    return Job(
        job_id=item["job_id"],
        tenant=item["tenant"],
        task=item["task"],
        payload_json=item.get("payload", "null"),
        pool=item["pool"],
        priority=item["priority"],
        state=JobState(item["state"]),
        epoch=int(item["epoch"]),
        attempt=int(item.get("attempt", 0)),
        max_attempts=int(item.get("max_attempts", 5)),
        crash_count=int(item.get("crash_count", 0)),
        retry=RetryPolicy.from_dict(_plain(item.get("retry", {}))),
        timeout_seconds=float(item.get("timeout_seconds", 300)),
        labels=dict(item.get("labels", {})),
        idempotency_key=item.get("idempotency_key"),
        spec_hash=item.get("spec_hash", ""),
        created_at=int(item.get("created_at", 0)),
        run_at=int(item.get("run_at", 0)),
        first_started_at=_opt_int(item.get("first_started_at")),
        started_at=_opt_int(item.get("started_at")),
        finished_at=_opt_int(item.get("finished_at")),
        lease_owner=item.get("lease_owner"),
        lease_expires_at=_opt_int(item.get("lease_expires_at")),
        cancel_requested=bool(item.get("cancel_requested", False)),
        result_json=item.get("result"),
        error=None if not error else JobError(
            type=error.get("type", ""), message=error.get("message", ""),
            traceback=error.get("traceback", ""), types=tuple(error.get("types", ())),
            kept=_opt_int(error.get("kept")),
        ),
        progress_json=item.get("progress"),
        history=tuple(Transition.from_item(h) for h in item.get("history", ())),
        extra={k: _plain(v) for k, v in item.items() if k not in _FIELDS | INDEX_KEYS},
    )


def job_to_item(job: Job) -> dict[str, Any]:
    """The DynamoDB item for a job (without index keys; the store adds those)."""
    item: dict[str, Any] = {
        "job_id": job.job_id, "tenant": job.tenant, "task": job.task,
        "payload": job.payload_json, "pool": job.pool, "priority": job.priority,
        "state": job.state.value, "epoch": job.epoch, "attempt": job.attempt,
        "max_attempts": job.max_attempts, "crash_count": job.crash_count,
        "retry": {k: v for k, v in job.retry.to_dict().items() if v is not None},
        "timeout_seconds": Decimal(str(job.timeout_seconds)), "labels": dict(job.labels),
        "spec_hash": job.spec_hash, "created_at": job.created_at, "run_at": job.run_at,
        "history": [t.to_item() for t in job.history],
    }
    item["retry"] = {k: Decimal(str(v)) if isinstance(v, float) else v
                     for k, v in item["retry"].items()}
    optional = {
        "idempotency_key": job.idempotency_key, "first_started_at": job.first_started_at,
        "started_at": job.started_at, "finished_at": job.finished_at,
        "lease_owner": job.lease_owner, "lease_expires_at": job.lease_expires_at,
        "result": job.result_json, "progress": job.progress_json,
        "error": None if job.error is None else {**asdict(job.error),
                                                 "types": list(job.error.types)},
    }
    item.update({k: v for k, v in optional.items() if v is not None})
    if job.cancel_requested:
        item["cancel_requested"] = True
    item.update(job.extra)
    return item
