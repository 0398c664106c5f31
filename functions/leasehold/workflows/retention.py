"""Retention of finished workflows: the workflow row and its steps' rows get one TTL.

A step gets no TTL of its own when it finishes (:func:`leasehold.core.retention.row_purge_at`):
its workflow may run, or be retried, long after. Once the workflow is settled (terminal, every
step terminal) :func:`stamp_steps` gives each step the workflow's TTL, on the condition that
the step is still terminal, *before* the write that settles the workflow carries the same TTL
(:func:`workflow_sets`). A process that dies in between leaves the workflow in the live index,
so the reconciler settles it again and the stamps are redone (each is idempotent). Cost: one
conditional UpdateItem per step, once per workflow.

A retried workflow takes the TTL off its own row and every step's (:func:`unstamp_steps`)
before any step runs again, so nothing of a live workflow is ever deleted. A retry that dies
before its steps are unstamped has re-queued none of them: the reconciler finds its failed
steps unrecorded, fails the workflow again and stamps them anew (retry it again).

The code's own deletes (a bulk delete) keep every step whose workflow still exists
(:func:`referenced_steps`, the workflows' deletion guard): a settled workflow can be retried,
and its view, its retry and its dependents' inputs read its steps' rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import condition_failed, to_av
from leasehold.core.jobs import Job
from leasehold.core.retention import PURGE_AT, purge_at
from leasehold.core.states import TERMINAL, JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.workflows.storage import DynamoWorkflowStore


def purge_for(app: Leasehold, now: int) -> int | None:
    """The TTL a workflow settled at ``now`` gives itself and its steps (None: kept forever)."""
    return purge_at(JobState.SUCCEEDED, now, app.settings.retention_days)


def workflow_sets(app: Leasehold, now: int) -> dict[str, Any]:
    """What the write that settles a workflow adds to its row."""
    purge = purge_for(app, now)
    return {} if purge is None else {PURGE_AT: purge}


def stamp_steps(app: Leasehold, step_job_ids: list[str], now: int) -> None:
    """Give each terminal step the settled workflow's TTL (a step put back live is left)."""
    purge = purge_for(app, now)
    if purge is None:
        return
    values = {":p": purge, **{f":t{i}": state.value for i, state in enumerate(sorted(TERMINAL))}}
    terminal = ", ".join(f":t{i}" for i in range(len(TERMINAL)))
    for job_id in step_job_ids:
        _update(app, job_id, "SET #purge = :p", f"#state IN ({terminal})", values)


def unstamp_steps(app: Leasehold, step_job_ids: list[str]) -> None:
    """Take the TTL off the steps of a workflow going back to RUNNING (the write that
    reopens the workflow takes its own)."""
    for job_id in step_job_ids:
        _update(app, job_id, "REMOVE #purge", "attribute_exists(job_id)", {})


def _update(app: Leasehold, job_id: str, expression: str, condition: str,
            values: dict[str, Any]) -> None:
    names = {"#purge": PURGE_AT} | ({"#state": "state"} if "#state" in condition else {})
    kwargs: dict[str, Any] = {"ExpressionAttributeValues": to_av(values)} if values else {}
    try:
        app.clients.dynamodb.update_item(
            TableName=app.settings.jobs_table, Key=job_key(job_id),
            UpdateExpression=expression, ConditionExpression=condition,
            ExpressionAttributeNames=names, **kwargs)
    except ClientError as exc:
        if not condition_failed(exc):
            raise


def referenced_steps(app: Leasehold, jobs: Sequence[Job]) -> dict[str, str]:
    """The deletion guard: every step whose workflow still exists, whatever its state."""
    steps = [job for job in jobs if "workflow_id" in job.extra]
    if not steps:
        return {}
    store = DynamoWorkflowStore(app.clients, app.settings)
    existing = {w.workflow_id for w in store.batch_get(
        sorted({str(job.extra["workflow_id"]) for job in steps}))}
    return {job.job_id: f"step {job.extra.get('step_id')!r} of workflow "
                        f"{job.extra['workflow_id']}"
            for job in steps if job.extra["workflow_id"] in existing}
