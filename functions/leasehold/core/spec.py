"""What a user asks for (:class:`JobSpec`) and its validation into a resolved spec.

Every invalid value raises :class:`~leasehold.errors.ValidationError` naming the field, before
anything is written.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from leasehold.clock import iso
from leasehold.core import flowcontrol
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import INTERNAL_PREFIX, TaskRegistry
from leasehold.core.retention import check_days
from leasehold.core.schemas import check_input
from leasehold.errors import PayloadTooLarge, ValidationError
from leasehold.settings import FUNCTION_TIMEOUT_RESERVE_SECONDS, PRIORITIES

MAX_PAYLOAD_BYTES = 256 * 1024
MAX_RESULT_BYTES = 64 * 1024
MAX_DELAY_SECONDS = 366 * 24 * 3600
MAX_ATTEMPTS_LIMIT = 100
MAX_TIMEOUT_SECONDS = 24 * 3600
MAX_LABELS = 32

#: The shapes of names and pools, and the characters no text may hold, as regular
#: expressions: these checks use them, and the API's schema states them (leasehold.api.models).
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"
POOL_PATTERN = r"^[a-z0-9][a-z0-9-]{0,31}$"
CONTROL_CHARS = r"\x00-\x1f\x7f"
_NAME = re.compile(NAME_PATTERN)
#: A tenant also takes the characters of IAM names and the ``/`` after a principal's kind
#: (``123456789012:user/dev+ci@corp``, see leasehold.api.principals), so an identity is never
#: folded to fit. Never ``#``: it separates a tenant from the rest of its DynamoDB keys
#: (``{tenant}#{shard}``, ``{tenant}#admit#{k}``), so no tenant is a prefix key of another.
_TENANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/+=,@-]{0,127}$")
_POOL = re.compile(POOL_PATTERN)
_CONTROL = re.compile(f"[{CONTROL_CHARS}]")


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    #: The registered task to run; or leave it empty and give ``target`` (never both).
    task: str = ""
    payload: Any = None
    tenant: str = "default"
    pool: str | None = None
    priority: str | None = None
    run_at_ms: int | None = None
    delay_seconds: float | None = None
    idempotency_key: str | None = None
    max_attempts: int | None = None
    retry: RetryPolicy | None = None
    timeout_seconds: float | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    #: Keyed flow control (leasehold.flow), each overriding the task's default:
    #: ``{"key"}``, ``{"key", "seconds", "max_wait_seconds"}``, and a start window.
    unique: Mapping[str, Any] | None = None
    debounce: Mapping[str, Any] | None = None
    start_within_seconds: float | None = None
    expires_at_ms: int | None = None
    #: Days the finished job is kept (None: the stack's ``retention_days``).
    retention_days: int | None = None
    #: Keyed flow control (``leasehold.core.flowcontrol``): None takes the task's default.
    concurrency: Any = None
    throttle: Any = None
    #: Bounds the whole job (all its attempts and a durable job's sleeps), from submission.
    deadline_seconds: float | None = None
    #: A job with no code: ``{"http": {...}}`` or ``{"aws": {...}}`` (``leasehold.targets``),
    #: run by a built-in task; ``task`` and ``payload`` are then not given.
    target: Mapping[str, Any] | None = None
    #: Set by :func:`targeted` only: ``task`` is a target kind's built-in task, and
    #: ``payload`` the target it checked (so the internal task may be named here).
    from_target: bool = False


@dataclass(frozen=True, kw_only=True)
class ResolvedSpec:
    """A valid spec with every default filled in from the task and the settings."""

    task: str
    payload_json: str
    tenant: str
    pool: str
    priority: str
    run_at_ms: int
    idempotency_key: str | None
    max_attempts: int
    retry: RetryPolicy
    timeout_seconds: float
    labels: dict[str, str]
    spec_hash: str
    retention_days: int | None = None
    #: The job's flow-control gate (keys rendered and scoped), None when it uses none.
    gate: Mapping[str, Any] | None = None
    deadline_seconds: float | None = None


def check_text(fieldname: str, value: object, *, limit: int, pattern: re.Pattern[str] | None = None,
               empty_ok: bool = False) -> str:
    if not isinstance(value, str):
        raise ValidationError(fieldname, "must be a string")
    if not value and not empty_ok:
        raise ValidationError(fieldname, "must not be empty")
    if len(value) > limit:
        raise ValidationError(fieldname, f"must be at most {limit} characters")
    if _CONTROL.search(value):
        raise ValidationError(fieldname, "must not contain control characters")
    if pattern is not None and not pattern.match(value):
        raise ValidationError(fieldname, f"has an invalid format: {value!r}")
    return value


def check_number(fieldname: str, value: object, *, low: float, high: float,
                 integer: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(fieldname, "must be a number")
    if integer and not (isinstance(value, int) or float(value).is_integer()):
        raise ValidationError(fieldname, "must be a whole number")
    if value != value or not low <= value <= high:  # NaN fails the first test
        raise ValidationError(fieldname, f"must be between {low:g} and {high:g}")
    return value


def encode_json(fieldname: str, value: Any, limit: int) -> str:
    """Canonical compact JSON, or a validation error naming the field."""
    try:
        text = json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False,
                          ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(fieldname, f"must be JSON-serializable: {exc}") from exc
    size = len(text.encode())
    if size > limit:
        raise PayloadTooLarge(fieldname, f"is {size} bytes serialized; the limit is {limit}")
    return text


def check_tenant(value: object) -> str:
    return check_text("tenant", value, limit=128, pattern=_TENANT)


def check_internal(task: str, internal: bool = False) -> None:
    """Refuse one of Leasehold's own tasks unless Leasehold itself submits it."""
    if task.startswith(INTERNAL_PREFIX) and not internal:
        raise ValidationError("task", f"{task!r} is internal to Leasehold: it runs only as "
                                      "Leasehold submits it (a bulk action: POST /jobs/bulk)")


def targeted(spec: JobSpec, registry: TaskRegistry) -> JobSpec:
    """A target job's spec as its built-in task's: the kind's task, the target checked into
    its payload, and the defaults it implies (per-host flow control, the call's timeout, the
    pool) under the job's own values. Any other spec is returned as it is. Every way a job is
    made calls it first (``resolve``, ``submit``), so intakes see the task's spec."""
    if spec.target is None:
        return spec
    if spec.task:
        raise ValidationError("target", "give task or target, not both")
    if spec.payload is not None:
        raise ValidationError("payload", "a target job takes no payload: the target says "
                                         "what to send")
    target = spec.target
    if not isinstance(target, Mapping) or len(target) != 1:
        kinds = ", ".join(sorted(registry.targets)) or "none in this deployment"
        raise ValidationError("target", f"must be an object with one kind ({kinds})")
    [(kind, value)] = target.items()
    found = registry.targets.get(kind)
    if found is None:
        kinds = ", ".join(sorted(registry.targets)) or "none in this deployment"
        raise ValidationError("target", f"unknown kind {kind!r}; known: {kinds}")
    if spec.pool and found.pools and spec.pool not in found.pools:
        raise ValidationError("pool", f"a {kind} target runs on a Python pool "
                                      f"({', '.join(found.pools)}), not {spec.pool!r}")
    payload, implied = found.prepare(value, spec.tenant)
    given: dict[str, Any] = {name: getattr(spec, name) for name in (
        "concurrency", "throttle", "timeout_seconds", "pool")}
    chosen: dict[str, Any] = {name: implied.get(name) if value is None else value
                              for name, value in given.items()}
    return replace(spec, task=found.task, payload=payload, target=None, from_target=True,
                   **chosen)


def resolve(spec: JobSpec, registry: TaskRegistry, *, pools: tuple[str, ...], now_ms: int,
            timeout_limits: Mapping[str, float] | None = None,
            internal: bool = False, payload_known: bool = True) -> ResolvedSpec:
    """Validate ``spec`` and fill in its defaults.

    ``timeout_limits``: the longest ``timeout_seconds`` of each pool that has a limit (a
    Lambda pool: its function timeout less a reserve, see ``Settings.job_timeout_limits``).
    A longer ``timeout_seconds`` given in ``spec`` is refused; a longer default of the task is
    lowered to the limit. ``internal``: Leasehold itself submits one of its own tasks
    (:data:`INTERNAL_PREFIX`); every other submission of one is refused.
    ``payload_known``: False for a template whose jobs take their payload from elsewhere (a
    trigger without a fixed payload takes each event's): a typed task's input is then
    checked per job, not here, and ``concurrency``/``throttle`` keys are checked as
    templates and the gate left None (the template renders it per job).
    """
    spec = targeted(spec, registry)
    if not spec.task:
        raise ValidationError("task", "give task (a registered task's name) or target (a job "
                                      "with no code: an HTTP call or an AWS action)")
    check_text("task", spec.task, limit=128, pattern=_NAME)
    check_internal(spec.task, internal or spec.from_target)
    definition = registry.get(spec.task)
    limit = min(MAX_PAYLOAD_BYTES, definition.max_payload_bytes or MAX_PAYLOAD_BYTES)
    payload_json = encode_json("payload", spec.payload, limit)
    if definition.input is not None and payload_known:
        # A typed task: the payload as the worker will read it (the JSON stored) must fit
        # the task's model; InvalidInput names the field, before anything is written.
        check_input(definition.input, json.loads(payload_json))
    tenant = check_tenant(spec.tenant)

    pool = spec.pool if spec.pool is not None else definition.pool
    check_text("pool", pool, limit=32, pattern=_POOL)
    if pool not in pools:
        raise ValidationError("pool", f"unknown pool {pool!r}; known: {', '.join(pools)}")
    priority = spec.priority if spec.priority is not None else definition.priority
    if priority not in PRIORITIES:
        raise ValidationError("priority", f"must be one of {', '.join(PRIORITIES)}")

    if spec.run_at_ms is not None and spec.delay_seconds is not None:
        raise ValidationError("run_at", "give run_at or delay_seconds, not both")
    if spec.delay_seconds is not None:
        delay = check_number("delay_seconds", spec.delay_seconds, low=0, high=MAX_DELAY_SECONDS)
        run_at = now_ms + int(delay * 1000)
    elif spec.run_at_ms is not None:
        latest = now_ms + MAX_DELAY_SECONDS * 1000
        check_number("run_at", spec.run_at_ms, low=-math.inf, high=math.inf, integer=True)
        if spec.run_at_ms > latest:  # said in dates: nobody reads epoch milliseconds
            raise ValidationError("run_at", f"{iso(int(spec.run_at_ms))} is too far ahead; "
                                            f"the latest is {iso(latest)} (366 days from now)")
        run_at = max(int(spec.run_at_ms), now_ms)  # the past means now
    else:
        run_at = now_ms

    key = spec.idempotency_key
    if key is not None:
        check_text("idempotency_key", key, limit=256)
    max_attempts = spec.max_attempts if spec.max_attempts is not None else definition.max_attempts
    check_number("max_attempts", max_attempts, low=1, high=MAX_ATTEMPTS_LIMIT, integer=True)
    timeout: float = (spec.timeout_seconds if spec.timeout_seconds is not None
                      else definition.timeout_seconds)
    check_number("timeout_seconds", timeout, low=1, high=MAX_TIMEOUT_SECONDS)
    longest = (timeout_limits or {}).get(pool)
    if longest is not None and timeout > longest:
        if spec.timeout_seconds is not None:
            # Asked for explicitly: a Lambda worker cannot outlive its function; a longer job
            # would be killed with its invocation, counted as a crash, and end DEAD.
            raise ValidationError(
                "timeout_seconds", f"must be at most {longest:g} for pool {pool!r}: its jobs run "
                "in a Lambda function that times out after "
                f"{longest + FUNCTION_TIMEOUT_RESERVE_SECONDS:g}s "
                "(use an ECS pool for longer jobs)")
        # The task's default (300 s unless it says otherwise) gives way to the pool: the job
        # gets the longest attempt its Lambda function allows.
        timeout = longest
    retry = spec.retry if spec.retry is not None else definition.retry
    if not isinstance(retry, RetryPolicy):
        raise ValidationError("retry", "must be a retry policy")

    if not isinstance(spec.labels, Mapping):
        raise ValidationError("labels", "must be an object of strings")
    if len(spec.labels) > MAX_LABELS:
        raise ValidationError("labels", f"at most {MAX_LABELS} labels")
    labels = {}
    for name, value in spec.labels.items():
        check_text("labels", name, limit=64, pattern=_NAME)
        labels[name] = check_text(f"labels.{name}", value, limit=256, empty_ok=True)

    keep = None if spec.retention_days is None else check_days("retention_days",
                                                                spec.retention_days)
    flow_job = {"concurrency": spec.concurrency, "throttle": spec.throttle}
    flow_task = {"concurrency": definition.concurrency, "throttle": definition.throttle}
    if payload_known:
        gate = flowcontrol.gate(tenant, spec.payload, job=flow_job, task=flow_task)
    else:
        # Each job brings its own payload: its keys are checked as templates here (the rule
        # ``unique`` and ``debounce`` follow) and rendered per job (``JobTemplate``).
        flowcontrol.gate(tenant, None,
                         job={k: flowcontrol.unrendered(k, v) for k, v in flow_job.items()},
                         task={k: flowcontrol.unrendered(k, v) for k, v in flow_task.items()})
        gate = None
    deadline = spec.deadline_seconds
    if deadline is not None:
        check_number("deadline_seconds", deadline, low=1, high=MAX_DELAY_SECONDS)

    # What makes two submissions "the same job" for idempotency: everything the user chose,
    # with the delay as given (a replay a minute later asks for the same delay, not run_at).
    chosen = {
        "task": spec.task, "payload": payload_json, "pool": pool, "priority": priority,
        "run_at": spec.run_at_ms, "delay": spec.delay_seconds, "max_attempts": max_attempts,
        "timeout": timeout, "retry": retry.to_dict(), "labels": labels,
        # Only when given, so the hashes of jobs that use no such option never change.
        **{name: value for name, value in (
            ("unique", spec.unique), ("debounce", spec.debounce),
            ("start_within", spec.start_within_seconds),
            ("expires_at", spec.expires_at_ms), ("deadline", deadline)) if value is not None},
    }
    if gate is not None:  # only then: the hash of a job without options stays as it was
        chosen["gate"] = gate
    fingerprint = json.dumps(chosen, sort_keys=True)
    if keep is not None:  # only when given, so every other job keeps its hash
        fingerprint += f"|retention_days={keep}"
    return ResolvedSpec(
        task=spec.task, payload_json=payload_json, tenant=tenant, pool=pool, priority=priority,
        run_at_ms=run_at, idempotency_key=key, max_attempts=int(max_attempts), retry=retry,
        timeout_seconds=float(timeout), labels=labels,
        deadline_seconds=None if deadline is None else float(deadline),
        spec_hash=hashlib.sha256(fingerprint.encode()).hexdigest()[:32], retention_days=keep,
        gate=gate,
    )
