"""What a workflow is: the spec a user submits, its validation, and the stored record."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from leasehold.core.jobs import _plain
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec, ResolvedSpec, check_tenant, check_text, resolve
from leasehold.errors import ValidationError
from leasehold.workflows.graph import Graph, check_graph

#: A step's row also carries its dependencies' results and both edge lists, so its payload
#: gets half the job limit to keep the row below DynamoDB's 400 KB item limit.
MAX_STEP_PAYLOAD_BYTES = 128 * 1024


class WorkflowState(StrEnum):
    #: Transient: the steps are being written; nothing runs until the workflow is RUNNING.
    CREATING = "CREATING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        return self in (WorkflowState.SUCCEEDED, WorkflowState.FAILED, WorkflowState.CANCELLED)


class FailurePolicy(StrEnum):
    """What a step's failure (DEAD, or cancelled on its own) does to the rest."""

    #: The workflow fails at once and its live steps are cancelled (the default).
    FAIL_WORKFLOW = "fail_workflow"
    #: Dependents run and see the failure in their inputs; the workflow ends FAILED.
    CONTINUE = "continue"
    #: Dependents run as if it had succeeded; the workflow may still succeed.
    IGNORE = "ignore"


@dataclass(frozen=True, kw_only=True)
class StepSpec:
    id: str
    #: The step's task; or leave it empty and give ``target`` (a job with no code).
    task: str = ""
    payload: Any = None
    depends_on: tuple[str, ...] = ()
    pool: str | None = None
    priority: str | None = None
    max_attempts: int | None = None
    retry: RetryPolicy | None = None
    timeout_seconds: float | None = None
    failure_policy: FailurePolicy = FailurePolicy.FAIL_WORKFLOW
    labels: Mapping[str, str] = field(default_factory=dict)
    #: Keyed flow control, as on a job (None: the task's default).
    concurrency: Any = None
    throttle: Any = None
    #: A job with no code instead of ``task`` (``leasehold.targets``).
    target: Any = None


@dataclass(frozen=True, kw_only=True)
class WorkflowSpec:
    steps: tuple[StepSpec, ...]
    tenant: str = "default"
    name: str | None = None
    idempotency_key: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Prepared:
    """A valid spec: its graph, each step resolved with defaults, and its fingerprint."""

    spec: WorkflowSpec
    graph: Graph
    steps: Mapping[str, ResolvedSpec]
    spec_hash: str


def prepare(spec: WorkflowSpec, registry: TaskRegistry, *, pools: tuple[str, ...],
            now: int, timeout_limits: Mapping[str, float] | None = None) -> Prepared:
    """Validate everything (graph first, then each step) without writing anything.

    ``timeout_limits``: as :func:`leasehold.core.spec.resolve` (Lambda pools' limits)."""
    tenant = check_tenant(spec.tenant)
    if spec.name is not None:
        check_text("name", spec.name, limit=128)
    if spec.idempotency_key is not None:
        check_text("idempotency_key", spec.idempotency_key, limit=256)
    graph = check_graph([(step.id, step.depends_on) for step in spec.steps])
    resolved: dict[str, ResolvedSpec] = {}
    for i, step in enumerate(spec.steps):
        if not isinstance(step.failure_policy, FailurePolicy):
            raise ValidationError(f"steps[{i}].failure_policy", f"step {step.id!r}: unknown policy")
        job_spec = JobSpec(
            task=step.task or "", target=step.target, payload=step.payload, tenant=tenant,
            pool=step.pool,
            priority=step.priority, max_attempts=step.max_attempts, retry=step.retry,
            timeout_seconds=step.timeout_seconds, labels=step.labels,
            concurrency=step.concurrency, throttle=step.throttle)
        try:
            one = resolve(job_spec, registry, pools=pools, now_ms=now,
                          timeout_limits=timeout_limits)
            size = len(one.payload_json.encode())
            if size > MAX_STEP_PAYLOAD_BYTES:
                raise _too_large(size)
        except ValidationError as exc:
            message = str(exc).removeprefix(f"{exc.field}: ")
            raise type(exc)(f"steps[{i}].{exc.field}", f"step {step.id!r}: {message}") from exc
        resolved[step.id] = one
    return Prepared(spec, graph, resolved, fingerprint(spec, graph, resolved))


def fingerprint(spec: WorkflowSpec, graph: Graph, steps: Mapping[str, ResolvedSpec]) -> str:
    """What makes two starts "the same workflow" (an idempotent replay, a second tick)."""
    text = json.dumps({
        "name": spec.name, "labels": dict(spec.labels),
        "steps": [[s.id, steps[s.id].spec_hash, list(graph.depends_on[s.id]),
                   s.failure_policy.value] for s in spec.steps],
    }, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _too_large(size: int) -> ValidationError:
    from leasehold.errors import PayloadTooLarge

    return PayloadTooLarge("payload", f"is {size} bytes serialized; a workflow step's limit "
                                      f"is {MAX_STEP_PAYLOAD_BYTES}")


# -- parsing JSON (the API body, a CLI file, a schedule's stored target) ---------------------

_STEP_FIELDS = {"id", "task", "payload", "depends_on", "pool", "priority", "max_attempts",
                "retry", "timeout", "timeout_seconds", "failure_policy", "labels",
                "concurrency", "throttle", "target"}
_WORKFLOW_FIELDS = {"steps", "tenant", "name", "idempotency_key", "labels"}


def parse_workflow(data: Mapping[str, Any], *, tenant: str | None = None) -> WorkflowSpec:
    """A :class:`WorkflowSpec` from its JSON form; ``tenant`` (the caller's) wins over the body."""
    if not isinstance(data, Mapping):
        raise ValidationError("body", "must be an object")
    _no_unknown("", data, _WORKFLOW_FIELDS)
    steps = data.get("steps")
    if not isinstance(steps, list):
        raise ValidationError("steps", "must be a list of steps")
    return WorkflowSpec(
        steps=tuple(parse_step(i, s) for i, s in enumerate(steps)),
        tenant=tenant if tenant is not None else data.get("tenant", "default"),
        name=data.get("name"), idempotency_key=data.get("idempotency_key"),
        labels=_labels("labels", data.get("labels")),
    )


def parse_step(i: int, data: Any) -> StepSpec:
    where = f"steps[{i}]"
    if not isinstance(data, Mapping):
        raise ValidationError(where, "must be an object")
    _no_unknown(where + ".", data, _STEP_FIELDS)
    step_id = data.get("id")
    name = repr(step_id)
    retry_data = data.get("retry")
    max_attempts = data.get("max_attempts")
    retry = None
    if retry_data is not None:
        if not isinstance(retry_data, Mapping):
            raise ValidationError(f"{where}.retry", f"step {name}: must be an object")
        retry_fields = dict(retry_data)
        # Celery and BullMQ users put the attempt limit with the backoff: accept it there too.
        if "max_attempts" in retry_fields:
            max_attempts = retry_fields.pop("max_attempts")
        try:
            retry = RetryPolicy.from_dict(retry_fields)
        except ValidationError as exc:
            raise ValidationError(f"{where}.{exc.field}", f"step {name}: {exc}") from exc
    policy = data.get("failure_policy", FailurePolicy.FAIL_WORKFLOW.value)
    try:
        failure_policy = FailurePolicy(policy)
    except ValueError:
        choices = ", ".join(p.value for p in FailurePolicy)
        raise ValidationError(f"{where}.failure_policy",
                              f"step {name}: must be one of {choices}") from None
    deps = data.get("depends_on", [])
    if not isinstance(deps, list):
        raise ValidationError(f"{where}.depends_on", f"step {name}: must be a list of step ids")
    return StepSpec(
        # id and task are type-checked by prepare(), which names the step.
        id=step_id, task=data.get("task") or "",  # type: ignore[arg-type]
        payload=data.get("payload"), target=data.get("target"),
        depends_on=tuple(deps),
        pool=data.get("pool"), priority=data.get("priority"), max_attempts=max_attempts,
        retry=retry, timeout_seconds=data.get("timeout_seconds", data.get("timeout")),
        failure_policy=failure_policy, labels=_labels(f"{where}.labels", data.get("labels")),
        concurrency=data.get("concurrency"), throttle=data.get("throttle"),
    )


def _no_unknown(prefix: str, data: Mapping[str, Any], known: set[str]) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValidationError(prefix + unknown[0], "unknown field")


def _labels(fieldname: str, value: Any) -> Mapping[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValidationError(fieldname, "must be an object of strings")
    return dict(value)


# -- the stored record ---------------------------------------------------------------------

#: How a recorded step counts (the values of the workflow's ``finished`` map).
OK, FAILED, IGNORED = "ok", "failed", "ignored"

@dataclass(frozen=True, kw_only=True)
class Workflow:
    workflow_id: str
    tenant: str
    state: WorkflowState
    step_ids: tuple[str, ...]
    name: str | None = None
    spec_hash: str = ""
    created_at: int = 0
    finished_at: int | None = None
    reason: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    #: Steps whose outcome was recorded (each once, however often it is reported).
    finished: frozenset[str] = frozenset()
    #: Steps that failed under ``continue``: the workflow ends FAILED because of them.
    failed: frozenset[str] = frozenset()
    #: False while some step may still be live (the reconciler keeps looking until then).
    settled: bool = False
    #: Where it came from (``schedule_id``, ``scheduled_for``, ...).
    origin: Mapping[str, Any] = field(default_factory=dict)

    @property
    def step_count(self) -> int:
        return len(self.step_ids)


def workflow_from_item(item: Mapping[str, Any]) -> Workflow:
    return Workflow(
        workflow_id=item["workflow_id"], tenant=item["tenant"],
        state=WorkflowState(item["state"]), step_ids=tuple(item.get("step_ids", ())),
        name=item.get("name"), spec_hash=item.get("spec_hash", ""),
        created_at=int(item.get("created_at", 0)),
        finished_at=None if item.get("finished_at") is None else int(item["finished_at"]),
        reason=item.get("reason", ""), labels=dict(item.get("labels", {})),
        finished=frozenset(item.get("finished", {})),
        failed=frozenset(k for k, v in item.get("finished", {}).items() if v == FAILED),
        settled="live_shard" not in item, origin=_plain(dict(item.get("origin", {}))),
    )
