"""Resume a FAILED or CANCELLED workflow: re-run its failed and cancelled steps and
everything downstream of them; the workflow is RUNNING again.

Steps that succeeded upstream keep their results (their dependents' input entries stay). In
order, so that a crash at any point leaves a workflow the reconciler can finish:

0. a workflow that lost a step's row (deleted by hand: Leasehold's own deletes keep them) is
   refused, naming the step: its dependents would run without it;
1. the workflow goes back to RUNNING (one conditional update: only from FAILED or CANCELLED,
   only once settled, with every re-run step's recorded outcome dropped and the count of
   steps left raised by as many), back in the live index and without its TTL;
2. every step loses the TTL the settle gave it (a running workflow keeps all of its steps);
3. each downstream step goes back to WAITING for its re-run dependencies (their input
   entries removed), *before* any step runs: a re-run root that finished first would find its
   dependent not WAITING and could not count itself on it;
4. each re-run step whose dependencies all succeeded is queued from scratch.

Every step change is the store's fenced transition, so a step someone else changed meanwhile
is left alone (the reconciler settles the workflow either way).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.dynamo import condition_failed, to_av
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change
from leasehold.workflows import inputs, retention
from leasehold.workflows.control import WorkflowDetail, get_workflow
from leasehold.workflows.model import WorkflowState
from leasehold.workflows.progress import workflow_store

S = WorkflowState
#: What a re-run step forgets of its last run.
FORGOTTEN = ("finished_at", "lease_owner", "first_started_at", "cancel_requested", "error",
             "result", "progress")


def to_rerun(steps: dict[str, Job]) -> set[str]:
    """The failed (DEAD) and cancelled steps and every step downstream of one."""
    todo = [step for step, job in steps.items()
            if job.state in (JobState.DEAD, JobState.CANCELLED)]
    chosen: set[str] = set()
    while todo:
        step = todo.pop()
        if step in chosen:
            continue
        chosen.add(step)
        todo += [dependent for dependent in dict(steps[step].extra.get("dependents", {}))
                 if dependent in steps]
    return chosen


def retry_workflow(app: Leasehold, workflow_id: str, tenant: str | None = None, *,
                   actor: str = "api") -> WorkflowDetail:
    """Re-run the workflow's failed and cancelled steps and all downstream; Conflict if it is
    not FAILED or CANCELLED, still winding down, or has nothing to re-run."""
    detail = get_workflow(app, workflow_id, tenant)
    workflow = detail.workflow
    if workflow.state not in (S.FAILED, S.CANCELLED):
        raise Conflict(f"workflow {workflow_id} is {workflow.state}; only a FAILED or "
                       "CANCELLED one can be retried", workflow_id=workflow_id)
    if not workflow.settled:
        raise Conflict(f"workflow {workflow_id} is still cancelling its steps; try again "
                       "in a moment", workflow_id=workflow_id)
    steps = {job.extra["step_id"]: job for job in detail.steps}
    missing = [step for step in workflow.step_ids if step not in steps]
    if missing:
        # Its dependents would run without it (a step with no row counts as no dependency).
        raise Conflict(f"workflow {workflow_id} cannot be retried: the row of step(s) "
                       f"{', '.join(repr(m) for m in missing)} is gone (deleted); submit the "
                       "workflow again", workflow_id=workflow_id, missing_steps=missing)
    rerun = to_rerun(steps)
    if not rerun:
        raise Conflict(f"workflow {workflow_id} has no failed or cancelled step to re-run",
                       workflow_id=workflow_id)
    now = app.now()
    recorded = [step for step in rerun if step in workflow.finished]
    names = {"#finished": "finished", **{f"#f{i}": step for i, step in enumerate(recorded)}}
    updated = _reopen(app, workflow_id, names, len(recorded), now)
    if not updated:
        raise Conflict(f"workflow {workflow_id} changed meanwhile; try again",
                       workflow_id=workflow_id)
    # Every step: a running workflow's succeeded steps are kept with it, not expired.
    retention.unstamp_steps(app, [job.job_id for job in detail.steps])
    for step in sorted(rerun):
        waiting_for = [d for d in steps[step].extra.get("depends_on", ()) if d in rerun]
        if waiting_for:
            _wait(app, steps[step], waiting_for, now, actor)
    for step in sorted(rerun):
        if not any(d in rerun for d in steps[step].extra.get("depends_on", ())):
            try:
                control.requeue(app, steps[step], actor=actor, reason="workflow retry")
            except (Conflict, NotFound):
                continue  # changed meanwhile: the reconciler settles the workflow
    return get_workflow(app, workflow_id)


def _reopen(app: Leasehold, workflow_id: str, names: dict[str, str], recorded: int,
            now: int) -> bool:
    """FAILED/CANCELLED and settled -> RUNNING, forgetting the re-run steps' outcomes."""
    store = workflow_store(app)
    live = store.live_keys(workflow_id, now)
    sets = "SET #state = :running, steps_left = steps_left + :n, live_shard = :shard, " \
           "check_at = :check"
    removes = ["#reason", "#finished_at", "#purge",
               *(f"#finished.#f{i}" for i in range(recorded))]
    values = {":running": S.RUNNING.value, ":n": recorded, ":shard": live["live_shard"],
              ":check": live["check_at"], ":failed": S.FAILED.value,
              ":cancelled": S.CANCELLED.value}
    try:
        app.clients.dynamodb.update_item(
            TableName=app.settings.workflows_table, Key={"workflow_id": {"S": workflow_id}},
            UpdateExpression=f"{sets} REMOVE {', '.join(removes)}",
            ConditionExpression="#state IN (:failed, :cancelled) AND "
                                "attribute_not_exists(live_shard)",
            ExpressionAttributeNames={"#state": "state", "#reason": "reason",
                                      "#finished_at": "finished_at",
                                      "#purge": retention.PURGE_AT,
                                      **(names if recorded else {})},
            ExpressionAttributeValues=to_av(values))
    except ClientError as exc:
        if not condition_failed(exc):
            raise
        return False
    return True


def _wait(app: Leasehold, job: Job, waiting_for: list[str], now: int, actor: str) -> None:
    """Put a downstream step back to WAITING for its re-run dependencies."""
    kept: dict[str, Any] = {dep: entry for dep, entry in
                            dict(job.extra.get(inputs.ATTRIBUTE, {})).items()
                            if dep not in waiting_for}
    change = Change(target=JobState.WAITING, actor=actor, reason="workflow retry",
                    set={"deps_pending": len(waiting_for), inputs.ATTRIBUTE: kept,
                         "attempt": 0, "crash_count": 0, "run_at": now,
                         **control.restart_sets(app, job, now)},
                    remove=FORGOTTEN)
    try:
        app.store.transition(job, change, now=now)
    except (Conflict, NotFound):
        return  # changed meanwhile: the reconciler settles the workflow

