"""Starting a workflow: validate everything, write the workflow and its steps, release the roots.

The writes cannot be one transaction (500 steps; a transaction holds 100 items), so they are
ordered to be safe at every cut:

1. the workflow item, CREATING (one conditional put on its id);
2. every step row, WAITING (conditional puts on derived ids, so a retry finds them);
3. the workflow flips CREATING -> RUNNING;
4. the roots are released (WAITING -> QUEUED, then sent).

Nothing runs before 3, so a start that dies earlier has run nothing: a retry with the same id
(idempotency key, or the schedule's derived id) resumes it, and otherwise the reconciler fails
it after :data:`CREATION_GRACE_SECONDS`. A start that dies after 3 is finished by the
reconciler, which releases any WAITING step whose dependencies are all counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from leasehold.core.ids import derived_id, new_id
from leasehold.core.states import JobState
from leasehold.errors import IdempotencyConflict
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import new_job
from leasehold.workflows import inputs
from leasehold.workflows.model import Prepared, Workflow, WorkflowSpec, WorkflowState, prepare
from leasehold.workflows.progress import (
    CHECK_SECONDS,
    release_if_ready,
    step_job_id,
    workflow_store,
)

#: How long a workflow may stay CREATING before the reconciler gives up on it.
CREATION_GRACE_SECONDS = 600.0


@dataclass(frozen=True)
class Started:
    workflow: Workflow
    #: False when the id already named a workflow (an idempotent replay or a second tick).
    created: bool


def workflow_id_for(spec: WorkflowSpec, now: int) -> str:
    if spec.idempotency_key is not None:
        return derived_id("workflow", spec.tenant, spec.idempotency_key)
    return new_id(now)


def start_workflow(app: Leasehold, spec: WorkflowSpec, *, now: int | None = None,
                   workflow_id: str | None = None, actor: str = "api",
                   origin: Mapping[str, Any] | None = None) -> Started:
    """Validate and start ``spec``; idempotent on ``workflow_id``.

    A schedule firing a workflow passes an id derived from ``(schedule_id, fire_time)`` and
    ``origin={"schedule_id": ..., "scheduled_for": ...}``: a double tick starts it once.
    Raises :class:`~leasehold.errors.ValidationError` (nothing written) for an invalid spec and
    :class:`~leasehold.errors.IdempotencyConflict` when the id names a different workflow.
    """
    now = app.now() if now is None else now
    prepared = prepare(spec, app.registry, pools=app.settings.pools, now=now,
                       timeout_limits=app.settings.job_timeout_limits())
    return start_prepared(app, prepared, now=now,
                          workflow_id=workflow_id or workflow_id_for(spec, now), actor=actor,
                          origin=origin)


def start_prepared(app: Leasehold, prepared: Prepared, *, now: int, workflow_id: str,
                   actor: str = "api", origin: Mapping[str, Any] | None = None) -> Started:
    """Start an already validated workflow; idempotent on ``workflow_id``.

    A schedule keeps its workflow prepared when it is written and starts it from that, so
    the ticker needs neither the task code nor the registry (as with a job template).
    """
    spec = prepared.spec
    tenant = prepared.steps[spec.steps[0].id].tenant
    store = workflow_store(app)
    item: dict[str, Any] = {
        "workflow_id": workflow_id, "tenant": tenant, "state": WorkflowState.CREATING.value,
        "step_ids": list(prepared.graph.order), "spec_hash": prepared.spec_hash,
        "created_at": now, "labels": dict(spec.labels), "origin": dict(origin or {}),
        "finished": {}, "steps_left": len(prepared.graph.order),
        **store.live_keys(workflow_id, now + int(CREATION_GRACE_SECONDS * 1000)),
    }
    if spec.name is not None:
        item["name"] = spec.name
    workflow, created = store.create(item)
    if not created:
        if workflow.spec_hash != prepared.spec_hash or workflow.tenant != tenant:
            raise IdempotencyConflict(
                f"workflow {workflow_id} exists with another spec", workflow_id=workflow_id)
        if workflow.state is not WorkflowState.CREATING:
            return Started(workflow, created=False)
        # CREATING: an earlier start died part-way; finish its work (every write is idempotent).
    rows = _create_steps(app, prepared, workflow_id, now, actor)
    running, _ = store.update(
        workflow_id, states=[WorkflowState.CREATING],
        sets={"state": WorkflowState.RUNNING.value,
              "check_at": now + int(CHECK_SECONDS * 1000)})
    if running is None or running.state is not WorkflowState.RUNNING:
        # The reconciler gave up on this start meanwhile (it took past the grace period).
        return Started(running or workflow, created)
    for root in prepared.graph.roots:
        release_if_ready(app, rows[root], now)
    return Started(running, created)


def _create_steps(app: Leasehold, prepared: Prepared, workflow_id: str, now: int,
                  actor: str) -> dict[str, Any]:
    graph = prepared.graph
    policies = {s.id: s.failure_policy.value for s in prepared.spec.steps}
    rows = {}
    for step in graph.order:
        extra = {
            "workflow_id": workflow_id, "step_id": step,
            "depends_on": list(graph.depends_on[step]),
            # Each dependent's share of its input budget rides with the edge, so a finishing
            # step can size the entry it writes without reading the dependent first.
            "dependents": {d: inputs.share(len(graph.depends_on[d]))
                           for d in graph.dependents[step]},
            "deps_pending": len(graph.depends_on[step]),
            "failure_policy": policies[step],
            inputs.ATTRIBUTE: {},
        }
        spec = prepared.steps[step]
        job = new_job(app, spec, now, job_id=step_job_id(workflow_id, step, spec.tenant),
                      state=JobState.WAITING, actor=actor, extra=extra)
        rows[step], _ = app.store.create(job)
    return rows
