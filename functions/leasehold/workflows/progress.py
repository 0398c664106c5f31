"""How a workflow moves: a step finishes, its dependents are counted and released.

The store calls :func:`observer` after every change it makes; when a step reaches a terminal
state this module

1. records the outcome on the workflow (once: ``attribute_not_exists(finished.#step)``),
2. counts it on each dependent (once: ``attribute_not_exists(inputs.#step)``) and releases a
   dependent whose count reaches zero (WAITING -> QUEUED, fenced on state and epoch),
3. finishes the workflow when every step's outcome is recorded.

Each write is idempotent, so running this twice for the same step (a duplicate delivery, a
manual re-run, the reconciler) changes nothing the first run did. A process that dies
between these writes leaves work the reconciler (:mod:`.reconcile`) redoes from the rows.
"""

from __future__ import annotations

import logging

from leasehold.core.ids import derived_job_id
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle import control, handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change, Observer
from leasehold.workflows import inputs, retention
from leasehold.workflows.model import FAILED, IGNORED, OK, FailurePolicy, Workflow, WorkflowState
from leasehold.workflows.storage import DynamoWorkflowStore

log = logging.getLogger(__name__)
ACTOR = "workflow"
#: A live workflow with no progress for this long is looked at by the reconciler. Progress
#: pushes the check back, so a workflow that moves is never re-read.
CHECK_SECONDS = 120.0

S = WorkflowState


def workflow_store(app: Leasehold) -> DynamoWorkflowStore:
    return DynamoWorkflowStore(app.clients, app.settings)


def step_job_id(workflow_id: str, step_id: str, tenant: str) -> str:
    """Step rows have derived ids: a retried start finds the rows the first one wrote. They
    live with the workflow's tenant (their homes, ``core.ids``)."""
    return derived_job_id(tenant, "workflow-step", workflow_id, step_id)


class StepObserver:
    """The store observer: a step that just became terminal moves its workflow on."""

    def __init__(self, app: Leasehold) -> None:
        self.app = app

    def __call__(self, job: Job, source: JobState | None) -> None:
        if source is None or source.terminal or not job.state.terminal:
            return  # cheap exit for every other change the store makes
        if "workflow_id" in job.extra:
            step_finished(self.app, job, self.app.now())


def install(app: Leasehold) -> None:
    """Make ``app``'s store drive workflows (idempotent)."""
    observers: list[Observer] = app.store.observers
    if not any(isinstance(o, StepObserver) for o in observers):
        observers.append(StepObserver(app))


def policy_of(job: Job) -> FailurePolicy:
    return FailurePolicy(job.extra.get("failure_policy", FailurePolicy.FAIL_WORKFLOW.value))


def passes_on(job: Job) -> bool:
    """Whether the dependents of this finished step may run."""
    return job.state is JobState.SUCCEEDED or policy_of(job) is not FailurePolicy.FAIL_WORKFLOW


def outcome_of(job: Job) -> str:
    """How a terminal step counts on its workflow."""
    if job.state is JobState.SUCCEEDED:
        return OK
    return IGNORED if policy_of(job) is FailurePolicy.IGNORE else FAILED


def step_finished(app: Leasehold, job: Job, now: int) -> None:
    """Record a terminal step and pass its outcome on. Safe to call any number of times."""
    store = workflow_store(app)
    workflow_id, step = job.extra["workflow_id"], job.extra["step_id"]
    if not passes_on(job):
        why = f"step {step!r} ended {job.state}"
        if job.state is JobState.CANCELLED:
            # Its own cancel's reason: an error left from an earlier attempt (a LeaseExpired
            # that was retried) is not why it ended.
            last = job.history[-1] if job.history else None
            if last is not None and last.reason:
                why += f": {last.reason}" + (f" by {last.actor}" if last.actor else "")
        elif job.error is not None:
            why += f": {job.error.type}: {job.error.message[:300]}"
        # check_at=now: if we die before the steps are cancelled, the next pass finishes it.
        workflow, changed = store.update(
            workflow_id, states=[S.RUNNING], record=(step, FAILED),
            sets={"state": S.FAILED.value, "reason": why, "finished_at": now, "check_at": now})
        if changed and workflow is not None:
            wind_down(app, workflow, now)
        return
    left, current = store.record_step(workflow_id, step, outcome_of(job),
                                      check_at=now + int(CHECK_SECONDS * 1000))
    if left is None and (current is None or current.state is not S.RUNNING):
        return  # the workflow ended (or never started): nothing may run after this step
    # Recorded now or earlier: pass it on either way, since a duplicate report may be the
    # retry of a run that died before its dependents were counted.
    propagate(app, store, job, now)
    if left == 0 or (current is not None and current.finished >= set(current.step_ids)):
        finish(app, store.get(workflow_id), now)


def propagate(app: Leasehold, store: DynamoWorkflowStore, job: Job, now: int) -> None:
    workflow_id, step = job.extra["workflow_id"], job.extra["step_id"]
    for dependent, limit in dict(job.extra.get("dependents", {})).items():
        dependent_id = step_job_id(workflow_id, dependent, job.tenant)
        pending = store.count_dependency(dependent_id, step, inputs.entry(job, int(limit)))
        if pending is None or pending <= 0:
            # Counted the last one now, or earlier by a run that may have died before the
            # release: read the row and release it if it is still WAITING at zero.
            try:
                release_if_ready(app, app.store.get(dependent_id), now)
            except NotFound:
                continue


def release_if_ready(app: Leasehold, row: Job, now: int) -> bool:
    """WAITING -> QUEUED once every dependency is counted; False if not ready or lost a race."""
    if row.state is not JobState.WAITING or int(row.extra.get("deps_pending", 0)) > 0:
        return False
    change = Change(
        target=JobState.QUEUED, actor=ACTOR, reason="dependencies done", bump_epoch=True,
        set={"run_at": now, "lease_expires_at": handoff.handoff_deadline(now, app.settings)})
    try:
        new = app.store.transition(row, change, now=now)
    except (Conflict, NotFound):
        return False  # released by a concurrent report, or cancelled: either way not ours
    handoff.send(app.queues, new, now)
    return True


def finish(app: Leasehold, workflow: Workflow, now: int) -> Workflow | None:
    """RUNNING -> SUCCEEDED/FAILED once every step's outcome is recorded."""
    if workflow.failed:
        target, why = S.FAILED, "failed steps: " + ", ".join(sorted(workflow.failed))
    else:
        target, why = S.SUCCEEDED, ""
    # Every step is terminal, so nothing is left to reconcile: leave the live index now,
    # with the retention TTL (on the steps first, see leasehold.workflows.retention).
    retention.stamp_steps(app, [step_job_id(workflow.workflow_id, s, workflow.tenant)
                                for s in workflow.step_ids], now)
    done, _ = workflow_store(app).update(
        workflow.workflow_id, states=[S.RUNNING], removes=("live_shard", "check_at"),
        sets={"state": target.value, "reason": why, "finished_at": now,
              **retention.workflow_sets(app, now)})
    return done


def wind_down(app: Leasehold, workflow: Workflow, now: int) -> bool:
    """Cancel the live steps of a finished workflow; True (and settled) once none is live.

    A RUNNING step is only flagged (its worker stops at the next heartbeat), so it may take a
    later reconciler pass to see every step terminal and drop the workflow from the index.
    """
    store = workflow_store(app)
    ids = [step_job_id(workflow.workflow_id, s, workflow.tenant) for s in workflow.step_ids]
    still_live = False
    for job in app.store.batch_get(ids):
        if job.state.terminal:
            continue
        try:
            job = control.cancel(app, job.job_id, actor=ACTOR)
        except Conflict:
            job = app.store.get(job.job_id)  # finished meanwhile, or kept changing
        still_live = still_live or job.state.live
    if still_live:
        store.update(workflow.workflow_id, sets={"check_at": now + int(CHECK_SECONDS * 1000)},
                     states=[S.FAILED, S.CANCELLED])
        return False
    retention.stamp_steps(app, ids, now)
    store.update(workflow.workflow_id, removes=("live_shard", "check_at"),
                 sets=retention.workflow_sets(app, now),
                 states=[S.SUCCEEDED, S.FAILED, S.CANCELLED])
    return True
