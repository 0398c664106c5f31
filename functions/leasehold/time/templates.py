"""Templates: what a schedule or a trigger submits, resolved once when it is written.

The template keeps the task's defaults as they were resolved (pool, priority, attempts,
timeout, retry), so the ticker and the trigger dispatcher build jobs without importing the
user's task code, and a schedule keeps firing the job its owner saw validated. A
:class:`WorkflowTemplate` does the same for a schedule that starts a whole workflow.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from leasehold.core import keyed
from leasehold.core.flowcontrol import gate as flow_gate
from leasehold.core.flowcontrol import plain
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec, ResolvedSpec, check_number, resolve
from leasehold.errors import PayloadTooLarge, ValidationError
from leasehold.workflows.graph import check_graph
from leasehold.workflows.model import (
    FailurePolicy,
    Prepared,
    StepSpec,
    WorkflowSpec,
    fingerprint,
    parse_workflow,
    prepare,
)

#: In a template's options when each job brings its payload (a trigger's events): the
#: ``concurrency``/``throttle`` of the job and of its task, rendered into each job's gate.
PER_JOB_GATE = "per_job_gate"


@dataclass(frozen=True, kw_only=True)
class JobTemplate:
    task: str
    payload_json: str
    tenant: str
    pool: str
    priority: str
    max_attempts: int
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    timeout_seconds: float = 300.0
    labels: Mapping[str, str] = field(default_factory=dict)
    #: Flow control as given (``concurrency``, ``throttle``) and as resolved (the gate).
    options: Mapping[str, Any] = field(default_factory=dict)
    gate: Mapping[str, Any] | None = None

    @classmethod
    def resolve(cls, registry: TaskRegistry, *, pools: tuple[str, ...], now: int, task: Any,
                payload: Any, tenant: str, pool: Any = None, priority: Any = None,
                max_attempts: Any = None, timeout_seconds: Any = None,
                labels: Any = None,
                timeout_limits: Mapping[str, float] | None = None,
                concurrency: Any = None, throttle: Any = None, unique: Any = None,
                debounce: Any = None, start_within_seconds: Any = None,
                target: Any = None, payload_known: bool = True) -> JobTemplate:
        """Validate as a submission would (errors name the field) and keep the result.

        ``unique``, ``debounce`` and ``start_within_seconds`` are applied when a job is made
        from the template, by the same intakes as a submission's (:meth:`intake_spec`); their
        shape is checked here, and a key template over a fixed payload is rendered once, so
        a field the payload lacks is a 422 now, not a failure at every fire.
        ``payload_known``: False for a trigger that takes each event's payload (a typed
        task's input is then checked per job, see ``leasehold.events.triggers``)."""
        resolved = resolve(JobSpec(task=task or "", target=target, payload=payload,
                                   tenant=tenant, pool=pool,
                                   priority=priority, max_attempts=max_attempts,
                                   timeout_seconds=timeout_seconds, labels=labels or {},
                                   concurrency=concurrency, throttle=throttle),
                           registry, pools=pools, now_ms=now, timeout_limits=timeout_limits,
                           payload_known=payload_known)
        # What POST /jobs checks of each job this template submits (keyed.check), now: an
        # option the job route refuses never makes a schedule that cannot fire.
        defaults = registry.get(resolved.task) if resolved.task in registry else None
        keyed.check(unique if unique is not None else defaults and defaults.unique,
                    debounce if debounce is not None else defaults and defaults.debounce,
                    json.loads(resolved.payload_json), payload_known=payload_known)
        if start_within_seconds is not None:
            check_number("start_within_seconds", start_within_seconds, low=0.001,
                         high=366 * 86_400)
        options = {k: v for k, v in (("concurrency", concurrency), ("throttle", throttle),
                                     ("unique", unique), ("debounce", debounce),
                                     ("start_within_seconds", start_within_seconds))
                   if v is not None}
        if not payload_known:
            # Keys over each job's payload, rendered per job as unique's and debounce's are
            # (the task's defaults kept too: the dispatcher does not import task code).
            flow = {"job": {"concurrency": concurrency, "throttle": throttle},
                    "task": {"concurrency": plain(defaults and defaults.concurrency),
                             "throttle": plain(defaults and defaults.throttle)}}
            if any(v is not None for part in flow.values() for v in part.values()):
                options[PER_JOB_GATE] = {part: {k: v for k, v in values.items()
                                                if v is not None}
                                         for part, values in flow.items()}
        return cls(task=resolved.task, payload_json=resolved.payload_json,
                   tenant=resolved.tenant, pool=resolved.pool, priority=resolved.priority,
                   max_attempts=resolved.max_attempts, retry=resolved.retry,
                   timeout_seconds=resolved.timeout_seconds, labels=resolved.labels,
                   options=options, gate=resolved.gate)

    @property
    def payload(self) -> Any:
        return json.loads(self.payload_json)

    def to_resolved(self, run_at: int, *, payload_json: str | None = None) -> ResolvedSpec:
        """The spec of one job from this template, due at ``run_at``."""
        payload = self.payload_json if payload_json is None else payload_json
        gate = self.gate
        if PER_JOB_GATE in self.options:  # a key over the payload may fail: a 422 for it
            per_job = self.options[PER_JOB_GATE]
            gate = flow_gate(self.tenant, json.loads(payload), job=per_job.get("job", {}),
                             task=per_job.get("task", {}))
        return ResolvedSpec(
            task=self.task, payload_json=payload, tenant=self.tenant, pool=self.pool,
            priority=self.priority, run_at_ms=run_at, idempotency_key=None,
            max_attempts=self.max_attempts, retry=self.retry,
            timeout_seconds=self.timeout_seconds, labels=dict(self.labels),
            spec_hash=self.fingerprint(payload), gate=gate,
        )

    def intake_spec(self, payload_json: str | None = None) -> JobSpec:
        """What the submission intakes read of a job made from this template (its unique
        key, debounce window and start window; the task's defaults apply where it has none)."""
        payload = self.payload_json if payload_json is None else payload_json
        return JobSpec(task=self.task, payload=json.loads(payload), tenant=self.tenant,
                       unique=self.options.get("unique"), debounce=self.options.get("debounce"),
                       start_within_seconds=self.options.get("start_within_seconds"))

    def fingerprint(self, payload_json: str | None = None) -> str:
        item = self.to_item()
        if payload_json is not None:
            item["payload"] = payload_json
        text = json.dumps(item, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def to_item(self) -> dict[str, Any]:
        retry = {k: Decimal(str(v)) if isinstance(v, float) else v
                 for k, v in self.retry.to_dict().items() if v is not None}
        return {
            "task": self.task, "payload": self.payload_json, "tenant": self.tenant,
            "pool": self.pool, "priority": self.priority, "max_attempts": self.max_attempts,
            "retry": retry, "timeout_seconds": Decimal(str(self.timeout_seconds)),
            "labels": dict(self.labels),
        } | ({"options": _decimals(dict(self.options))} if self.options else {}) \
          | ({"gate": dict(self.gate)} if self.gate else {})

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> JobTemplate:
        retry = {k: (int(v) if v == v.to_integral_value() else float(v))
                 if isinstance(v, Decimal) else v for k, v in dict(item.get("retry", {})).items()}
        return cls(
            task=str(item["task"]), payload_json=str(item.get("payload", "null")),
            tenant=str(item["tenant"]), pool=str(item["pool"]), priority=str(item["priority"]),
            max_attempts=int(item["max_attempts"]), retry=RetryPolicy.from_dict(retry),
            timeout_seconds=float(item.get("timeout_seconds", 300)),
            labels={str(k): str(v) for k, v in dict(item.get("labels", {})).items()},
            options=_plain(dict(item.get("options") or {})),
            gate=_plain(dict(item["gate"])) if item.get("gate") else None,
        )


#: A scheduled workflow is stored in its schedule's item, which DynamoDB caps at 400 KB; the
#: rest of the item is small, so the steps may take this much of it (as stored JSON).
MAX_WORKFLOW_TEMPLATE_BYTES = 300 * 1024


@dataclass(frozen=True, kw_only=True)
class StepTemplate:
    id: str
    depends_on: tuple[str, ...]
    failure_policy: str
    job: JobTemplate


@dataclass(frozen=True, kw_only=True)
class WorkflowTemplate:
    """A workflow a schedule starts: every step resolved once, when the schedule is written.

    Like :class:`JobTemplate` it keeps what validation resolved (each step's pool, priority,
    attempts, timeout, retry), so the ticker starts it without the user's task code.
    """

    tenant: str
    steps: tuple[StepTemplate, ...]
    name: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def resolve(cls, registry: TaskRegistry, *, pools: tuple[str, ...], now: int, body: Any,
                tenant: str,
                timeout_limits: Mapping[str, float] | None = None) -> WorkflowTemplate:
        """Validate ``body`` (the ``steps`` shape of POST /workflows) as a start would:
        graph, tasks, sizes; errors name the field under ``workflow.``."""
        if not isinstance(body, Mapping):
            raise ValidationError("workflow", "must be an object with a list of steps")
        if body.get("idempotency_key") is not None:
            # Each run's id derives from (schedule, configuration, fire time) instead.
            raise ValidationError("workflow.idempotency_key",
                                  "a schedule gives each run its own id; leave it out")
        try:
            spec = parse_workflow(body, tenant=tenant)
            prepared = prepare(spec, registry, pools=pools, now=now,
                               timeout_limits=timeout_limits)
        except ValidationError as exc:
            message = str(exc).removeprefix(f"{exc.field}: ")
            raise type(exc)(f"workflow.{exc.field}", message) from exc
        steps = []
        for step in spec.steps:
            one = prepared.steps[step.id]
            steps.append(StepTemplate(
                id=step.id, depends_on=prepared.graph.depends_on[step.id],
                failure_policy=step.failure_policy.value,
                job=JobTemplate(task=one.task, payload_json=one.payload_json, tenant=one.tenant,
                                pool=one.pool, priority=one.priority,
                                max_attempts=one.max_attempts, retry=one.retry,
                                timeout_seconds=one.timeout_seconds, labels=one.labels)))
        template = cls(tenant=prepared.steps[spec.steps[0].id].tenant, steps=tuple(steps),
                       name=spec.name, labels=dict(spec.labels))
        size = len(template.to_item().encode())
        if size > MAX_WORKFLOW_TEMPLATE_BYTES:
            raise PayloadTooLarge("workflow", f"is {size} bytes stored; a scheduled "
                                              f"workflow's limit is {MAX_WORKFLOW_TEMPLATE_BYTES}")
        return template

    def to_prepared(self, now: int) -> Prepared:
        """The validated workflow of one run, as :func:`~leasehold.workflows.prepare` gives it."""
        spec = WorkflowSpec(
            steps=tuple(StepSpec(id=s.id, task=s.job.task, payload=s.job.payload,
                                 depends_on=s.depends_on,
                                 failure_policy=FailurePolicy(s.failure_policy),
                                 labels=s.job.labels) for s in self.steps),
            tenant=self.tenant, name=self.name, labels=self.labels)
        # Checked when the schedule was written; this only rebuilds the edges (pure).
        graph = check_graph([(s.id, s.depends_on) for s in self.steps])
        resolved = {s.id: s.job.to_resolved(now) for s in self.steps}
        return Prepared(spec, graph, resolved, fingerprint(spec, graph, resolved))

    def view(self) -> dict[str, Any]:
        """The workflow as the API shows it: a body POST /workflows (or a schedule) accepts."""
        return {"name": self.name, "labels": dict(self.labels), "steps": [{
            "id": s.id, "task": s.job.task, "payload": s.job.payload,
            "depends_on": list(s.depends_on), "pool": s.job.pool, "priority": s.job.priority,
            "max_attempts": s.job.max_attempts, "timeout_seconds": s.job.timeout_seconds,
            "retry": s.job.retry.to_dict(), "failure_policy": s.failure_policy,
            "labels": dict(s.job.labels)} for s in self.steps]}

    def to_item(self) -> str:
        # One JSON string rather than nested maps: its size is what the limit above measures,
        # and 500 steps of nested attributes would cost more of the item than their text.
        return json.dumps({
            "tenant": self.tenant, "name": self.name, "labels": dict(self.labels),
            "steps": [{"id": s.id, "depends_on": list(s.depends_on),
                       "failure_policy": s.failure_policy, "job": s.job.to_item()}
                      for s in self.steps]}, separators=(",", ":"), default=_number)

    @classmethod
    def from_item(cls, text: str) -> WorkflowTemplate:
        data = json.loads(text)
        return cls(
            tenant=data["tenant"], name=data.get("name"), labels=data.get("labels") or {},
            steps=tuple(StepTemplate(id=s["id"], depends_on=tuple(s["depends_on"]),
                                     failure_policy=s["failure_policy"],
                                     job=JobTemplate.from_item(s["job"]))
                        for s in data["steps"]))


Target = tuple[JobTemplate | None, WorkflowTemplate | None]


def resolve_target(registry: TaskRegistry, *, pools: tuple[str, ...], now: int, tenant: str,
                   body: Mapping[str, Any], values: Mapping[str, Any],
                   job_fields: Set[str], current: Target | None = None,
                   timeout_limits: Mapping[str, float] | None = None) -> Target:
    """What a schedule fires, from its body: (job template, None) or (None, workflow).

    ``body`` is what the user sent, ``values`` the body over the current schedule's fields,
    ``job_fields`` the job template fields ``body`` names and ``current`` what an update
    starts from. Giving both a job and a workflow is an error naming ``workflow``.
    """
    if "workflow" in body:
        if job_fields:
            raise ValidationError("workflow", "give a job (task, payload, ...) or a workflow, "
                                              f"not both (got {', '.join(sorted(job_fields))})")
        return None, WorkflowTemplate.resolve(registry, pools=pools, now=now,
                                              body=body["workflow"], tenant=tenant,
                                              timeout_limits=timeout_limits)
    if current is not None and not job_fields:
        return current
    if current is not None and current[1] is not None and not {"task", "target"} & job_fields:
        raise ValidationError(sorted(job_fields)[0], "this schedule starts a workflow: change "
                                                     "its steps with workflow, or give task")
    task, payload, target = job_source(registry, body, values)
    if task is None and target is None:
        raise ValidationError("task", "required: give task (a job), target (a job with no "
                                      "code) or workflow (its steps)")
    return JobTemplate.resolve(
        registry, pools=pools, now=now, task=task, payload=payload, target=target,
        tenant=tenant, pool=values.get("pool"), priority=values.get("priority"),
        max_attempts=values.get("max_attempts"), timeout_seconds=values.get("timeout_seconds"),
        labels=values.get("labels"), timeout_limits=timeout_limits,
        concurrency=values.get("concurrency"), throttle=values.get("throttle"),
        unique=values.get("unique"), debounce=values.get("debounce"),
        start_within_seconds=values.get("start_within_seconds")), None


def job_source(registry: TaskRegistry, body: Mapping[str, Any], values: Mapping[str, Any]
               ) -> tuple[Any, Any, Any]:
    """(task, payload, target) of a schedule's job: a new ``target`` replaces the task, a new
    ``task`` the target, and a schedule made from a target keeps it through other changes
    (its stored task is the target's built-in one, its payload the checked target)."""
    if "target" in body:
        if body.get("task") is not None:
            raise ValidationError("target", "give task or target, not both")
        return None, values.get("payload") if "payload" in body else None, body["target"]
    task = values.get("task")
    if "task" not in body:
        for kind, found in registry.targets.items():
            if task == found.task:
                return None, None, {kind: values.get("payload")}
    return task, values.get("payload"), None


def _number(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"not JSON: {value!r}")


def _plain(value: Any) -> Any:
    """A stored option's Decimals back to int/float, recursively."""
    if isinstance(value, Decimal):
        return _number(value)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _decimals(value: Any) -> Any:
    """Floats to Decimals, recursively (DynamoDB takes no float)."""
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, Mapping):
        return {k: _decimals(v) for k, v in value.items()}
    return value
