"""What users do to workflows: look at one (with its graph), list them, cancel one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from leasehold.clock import iso
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle.app import Leasehold
from leasehold.workflows.model import Workflow, WorkflowState
from leasehold.workflows.progress import step_job_id, wind_down, workflow_store

S = WorkflowState


@dataclass(frozen=True)
class WorkflowDetail:
    workflow: Workflow
    #: Step rows in submission order (a step whose row is missing is left out).
    steps: tuple[Job, ...]

    def view(self) -> dict[str, Any]:
        """The workflow and its graph, JSON-ready, as the API and CLI show it."""
        return {**summary(self.workflow),
                "counts": dict(Counter(job.state.value for job in self.steps)),
                "steps": [step_view(job) for job in self.steps]}


def summary(workflow: Workflow) -> dict[str, Any]:
    return {
        "workflow_id": workflow.workflow_id, "tenant": workflow.tenant, "name": workflow.name,
        "state": workflow.state.value, "reason": workflow.reason or None,
        "labels": dict(workflow.labels), "created_at": iso(workflow.created_at),
        "finished_at": iso(workflow.finished_at), "step_count": workflow.step_count,
        "finished_steps": len(workflow.finished), **dict(workflow.origin),
    }


def step_view(job: Job) -> dict[str, Any]:
    error = None if job.error is None else {"type": job.error.type,
                                            "message": job.error.message}
    return {
        "id": job.extra["step_id"], "job_id": job.job_id, "task": job.task,
        "state": job.state.value, "depends_on": list(job.extra.get("depends_on", ())),
        "failure_policy": job.extra.get("failure_policy"),
        "waiting_for": int(job.extra.get("deps_pending", 0)),
        "attempts": job.attempt, "started_at": iso(job.first_started_at),
        "finished_at": iso(job.finished_at), "error": error,
        "result": job.result if job.state is JobState.SUCCEEDED else None,
    }


def get_workflow(app: Leasehold, workflow_id: str, tenant: str | None = None) -> WorkflowDetail:
    """The workflow and its steps, or NotFound (another tenant's is NotFound too)."""
    workflow = workflow_store(app).get(workflow_id)
    if tenant is not None and workflow.tenant != tenant:
        raise NotFound(f"no workflow {workflow_id}", workflow_id=workflow_id)
    rows = app.store.batch_get([step_job_id(workflow_id, s, workflow.tenant)
                                for s in workflow.step_ids])
    return WorkflowDetail(workflow, tuple(rows))


def list_workflows(app: Leasehold, tenant: str, *, limit: int = 50,
                   cursor: Mapping[str, Any] | None = None, state: WorkflowState | None = None
                   ) -> tuple[list[Workflow], Mapping[str, Any] | None]:
    """A page of the tenant's workflows, newest first, and the cursor of the next page.

    ``state`` filters the page (so a page may hold fewer than ``limit``; follow the cursor).
    """
    store = workflow_store(app)
    ids, next_cursor = store.by_tenant(tenant, limit=limit, cursor=cursor)
    workflows = store.batch_get(ids)
    if state is not None:
        workflows = [w for w in workflows if w.state is state]
    return workflows, next_cursor


def cancel_workflow(app: Leasehold, workflow_id: str, tenant: str | None = None, *,
                    actor: str = "api", reason: str = "cancelled") -> WorkflowDetail:
    """Cancel the workflow and its live steps (running ones stop at their next heartbeat).

    Cancelling a cancelled workflow cancels whatever step is still live and returns it;
    a workflow that already succeeded or failed is a Conflict.
    """
    store = workflow_store(app)
    current = get_workflow(app, workflow_id, tenant).workflow
    now = app.now()
    workflow, changed = store.update(
        workflow_id, states=[S.CREATING, S.RUNNING, S.CANCELLED],
        sets={"state": S.CANCELLED.value, "finished_at": current.finished_at or now,
              "reason": current.reason or f"{reason} by {actor}",
              # Back in the live index until every step is seen terminal.
              **store.live_keys(workflow_id, now)})
    if not changed or workflow is None:
        latest = store.get(workflow_id)
        raise Conflict(f"workflow {workflow_id} already finished ({latest.state})",
                       workflow_id=workflow_id)
    wind_down(app, workflow, now)
    return get_workflow(app, workflow_id)
