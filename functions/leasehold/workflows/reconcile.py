"""The reconciler: finishes what a process that died mid-way left undone.

It reads the sparse ``live`` index (workflows whose next check is due: no progress for
:data:`~.progress.CHECK_SECONDS`), reads each one's step rows, and redoes from them only
what is missing: an outcome not recorded, a dependent that has not counted a finished
dependency, a WAITING step whose count reached zero but was never released, a workflow whose
steps all finished but that was never closed, a failed or cancelled workflow with live steps.
Every repair is the same idempotent write the normal path makes, so racing a live worker or
another reconciler is harmless.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle.app import Leasehold
from leasehold.workflows.inputs import ATTRIBUTE as INPUTS
from leasehold.workflows.model import Workflow, WorkflowState
from leasehold.workflows.progress import (
    CHECK_SECONDS,
    finish,
    passes_on,
    release_if_ready,
    step_finished,
    step_job_id,
    wind_down,
    workflow_store,
)
from leasehold.workflows.start import CREATION_GRACE_SECONDS

log = logging.getLogger(__name__)
S = WorkflowState


@dataclass
class ReconcileReport:
    examined: int = 0
    repaired: int = 0    # steps whose outcome was recorded or passed on again
    released: int = 0    # WAITING steps whose dependencies were all done
    closed: int = 0      # workflows finished, failed or settled here
    skipped: int = 0
    workflow_ids: list[str] = field(default_factory=list)


def reconcile(app: Leasehold, *, now: int | None = None,
              limit_per_shard: int = 100) -> ReconcileReport:
    """One pass over the live workflows whose check is due (the sweeper calls this)."""
    now = app.now() if now is None else now
    report = ReconcileReport()
    store = workflow_store(app)
    for shard in range(app.settings.shards):
        for workflow_id in store.live(shard, now, limit_per_shard):
            report.examined += 1
            try:
                reconcile_workflow(app, workflow_id, now=now, report=report)
            except (Conflict, NotFound):
                report.skipped += 1
            except Exception:  # one broken workflow must not stop the pass
                log.exception("reconciling workflow %s failed", workflow_id)
                report.skipped += 1
    return report


def reconcile_workflow(app: Leasehold, workflow_id: str, *, now: int | None = None,
                       report: ReconcileReport | None = None) -> Workflow:
    """Repair one workflow now, whatever its check time."""
    now = app.now() if now is None else now
    report = report if report is not None else ReconcileReport()
    store = workflow_store(app)
    workflow = store.get(workflow_id)
    if workflow.state is S.CREATING:
        if now - workflow.created_at < CREATION_GRACE_SECONDS * 1000:
            return workflow  # its start may still be writing steps
        failed, changed = store.update(
            workflow_id, states=[S.CREATING],
            sets={"state": S.FAILED.value, "finished_at": now,
                  "reason": "the start was interrupted before every step was written; "
                            "submit it again"})
        if not changed or failed is None:
            return store.get(workflow_id)
        workflow = failed
    if workflow.state.terminal:
        if wind_down(app, workflow, now):
            report.closed += 1
        report.workflow_ids.append(workflow_id)
        return store.get(workflow_id)
    rows = {job.extra["step_id"]: job for job in app.store.batch_get(
        [step_job_id(workflow_id, s, workflow.tenant) for s in workflow.step_ids])}
    for step in workflow.step_ids:
        job = rows.get(step)
        if job is not None and job.state.terminal and _unfinished_business(workflow, job, rows):
            step_finished(app, job, now)
            report.repaired += 1
    for job in rows.values():
        if job.state is JobState.WAITING and release_if_ready(app, job, now):
            report.released += 1
    workflow = store.get(workflow_id)
    if workflow.state is S.RUNNING and workflow.finished >= set(workflow.step_ids):
        finish(app, workflow, now)
        report.closed += 1
    elif workflow.state is S.RUNNING:
        store.update(workflow_id, states=[S.RUNNING],
                     sets={"check_at": now + int(CHECK_SECONDS * 1000)})
    elif workflow.state.terminal and wind_down(app, workflow, now):
        report.closed += 1
    report.workflow_ids.append(workflow_id)
    return store.get(workflow_id)


def _unfinished_business(workflow: Workflow, job: Job, rows: dict[str, Job]) -> bool:
    """Whether a terminal step's outcome is unrecorded or not yet counted by a dependent."""
    step = job.extra["step_id"]
    if step not in workflow.finished:
        return True
    if not passes_on(job):
        return False
    for dependent in dict(job.extra.get("dependents", {})):
        row = rows.get(dependent)
        if row is not None and row.state is JobState.WAITING and \
                step not in row.extra.get(INPUTS, {}):
            return True
    return False
