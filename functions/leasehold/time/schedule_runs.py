"""The runs a schedule starts (one job, or a whole workflow, per occurrence) and what the
overlap policy needs of them: is the previous run live, and cancel it.

A workflow run is started with an id derived from (schedule, configuration, fire time), like
a job run, and :func:`~leasehold.workflows.start_prepared` is idempotent on that id, so a
double or concurrent tick starts it once. Unlike a job it is started when it is due, never
ahead: its steps are released at once and cannot wait in SQS with ``DelaySeconds``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.definitions import BY_SCHEDULE_INDEX, job_key
from leasehold.aws.dynamo import Cancelled, condition_failed, query_page, to_av, transact_write
from leasehold.clock import iso
from leasehold.core.ids import derived_job_id
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import COUNTED
from leasehold.time.schedule_model import Schedule
from leasehold.workflows import cancel_workflow, start_prepared
from leasehold.workflows.progress import workflow_store

ACTOR = "scheduler"


def run_id(schedule: Schedule, fire_at: int, *, manual: bool = False) -> str:
    """The id of an occurrence's run: the same for every tick that fires it."""
    return derived_job_id(schedule.tenant, "schedule", schedule.schedule_id,
                          str(schedule.config_version), "manual" if manual else "cron",
                          str(fire_at))


def fire_workflow(app: Leasehold, schedule: Schedule, fire_at: int, now: int, *,
                  manual: bool = False) -> tuple[str, bool]:
    """Start (once) the workflow of one occurrence; (workflow id, started by this call)."""
    if schedule.workflow is None:
        raise ValueError(f"schedule {schedule.schedule_id} fires a job, not a workflow")
    started = start_prepared(
        app, schedule.workflow.to_prepared(now), now=now,
        workflow_id=run_id(schedule, fire_at, manual=manual), actor=ACTOR,
        origin={"schedule_id": schedule.schedule_id, "scheduled_for": iso(fire_at)})
    return started.workflow.workflow_id, started.created


def previous_live(app: Leasehold, schedule: Schedule) -> str | None:
    """The id of the schedule's last run (a job or a workflow) if it has not finished."""
    if not schedule.last_job_id:
        return None
    try:
        if schedule.workflow is not None:
            # CREATING counts as live: a start that died part-way is finished or failed by
            # the reconciler, and until then a second run could overlap it.
            live = not workflow_store(app).get(schedule.last_job_id).state.terminal
        else:
            live = app.store.get(schedule.last_job_id).state.live
    except NotFound:
        return None
    return schedule.last_job_id if live else None


def cancel_run(app: Leasehold, schedule: Schedule, run: str) -> bool:
    """Cancel one of the schedule's runs (overlap ``replace``); False if it finished first."""
    if schedule.workflow is None:
        return cancel_quietly(app, run)
    try:
        cancel_workflow(app, run, actor=ACTOR, reason="replaced")
    except (Conflict, NotFound):
        return False  # it finished meanwhile: nothing to replace
    return True


def cancel_quietly(app: Leasehold, job_id: str) -> bool:
    try:
        control.cancel(app, job_id, actor=ACTOR)
    except (Conflict, NotFound):
        return False  # it finished (or was cancelled) meanwhile: nothing to replace
    return True


def job_ids(app: Leasehold, schedule_id: str, *, after: str | None = None,
            before: str | None = None, limit: int = 50,
            newest_first: bool = True, cursor: Mapping[str, Any] | None = None
            ) -> tuple[list[str], Mapping[str, Any] | None]:
    """Ids of the schedule's jobs from the sparse ``by_schedule`` index of the jobs table."""
    condition = "schedule_id = :s"
    values: dict[str, Any] = {":s": schedule_id}
    if after is not None:
        condition += " AND scheduled_for > :after"
        values[":after"] = after
    elif before is not None:
        condition += " AND scheduled_for < :before"
        values[":before"] = before
    items, last = query_page(
        app.clients.dynamodb, limit=limit, cursor=cursor, TableName=app.settings.jobs_table,
        IndexName=BY_SCHEDULE_INDEX.name, KeyConditionExpression=condition,
        ExpressionAttributeValues=to_av(values), ScanIndexForward=not newest_first)
    return [item["job_id"] for item in items], last


def cancel_pending(app: Leasehold, schedule_id: str, now: int) -> list[str]:
    """Withdraw the schedule's occurrences handed off ahead of time that have not started.

    A withdrawn run leaves no row behind (it is deleted, not CANCELLED): a pause, an update or
    a delete must not leave a trail of cancelled runs in the schedule's history and the job
    list, nor count them as runs (the schedule's ``run_count`` goes down with each, in the
    same transaction). A run that holds a tenant's live-job slot is cancelled instead, so the
    slot goes back with it. Workflow runs are never started ahead: a workflow schedule has
    none.
    """
    ids, _ = job_ids(app, schedule_id, after=iso(now), limit=500, newest_first=False)
    withdrawn = []
    for job in app.store.batch_get(ids):
        if job.state not in (JobState.SCHEDULED, JobState.QUEUED) or \
                job.first_started_at is not None:
            continue
        if job.extra.get(COUNTED):
            if cancel_quietly(app, job.job_id):
                withdrawn.append(job.job_id)
        elif withdraw(app, schedule_id, job):
            withdrawn.append(job.job_id)
    return withdrawn


def withdraw(app: Leasehold, schedule_id: str, job: Job) -> bool:
    """Delete a pre-queued run that never started and uncount it, in one transaction; False
    if it changed first (started, cancelled, or already withdrawn by a concurrent call).

    Its message, if handed off, finds no row and is acknowledged as stale. The schedule's
    ``version`` goes up with the count, so no full write of the schedule read before this
    one can put the old count back.
    """
    delete = _delete(app, job)
    uncount = {"Update": {
        "TableName": app.settings.schedules_table,
        "Key": {"schedule_id": {"S": schedule_id}},
        "UpdateExpression": "SET run_count = run_count - :one, version = version + :one",
        "ConditionExpression": "run_count > :zero",
        "ExpressionAttributeValues": to_av({":one": 1, ":zero": 0})}}
    try:
        transact_write(app.clients.dynamodb, [delete, uncount])
    except Cancelled as cancelled:
        if cancelled.failed(0):
            return False
        if cancelled.failed(1):  # the schedule is gone (deleted): the row goes alone
            return withdraw_row(app, delete)
        raise
    return True


def withdraw_uncounted(app: Leasehold, job_id: str) -> bool:
    """Withdraw a run no schedule counted (a tick whose save lost to a user's change); a run
    that started or holds a slot meanwhile is cancelled instead, as before."""
    try:
        job = app.store.get(job_id)
    except NotFound:
        return False
    if job.state in (JobState.SCHEDULED, JobState.QUEUED) and job.first_started_at is None \
            and not job.extra.get(COUNTED) and withdraw_row(app, _delete(app, job)):
        return True
    return cancel_quietly(app, job_id)


def _delete(app: Leasehold, job: Job) -> dict[str, Any]:
    """The conditional delete of a run that has not started since ``job`` was read."""
    return {"Delete": {
        "TableName": app.settings.jobs_table, "Key": job_key(job.job_id),
        "ConditionExpression": "#state = :state AND epoch = :epoch AND "
                               "attribute_not_exists(first_started_at)",
        "ExpressionAttributeNames": {"#state": "state"},
        "ExpressionAttributeValues": to_av({":state": job.state.value, ":epoch": job.epoch})}}


def withdraw_row(app: Leasehold, delete: Mapping[str, Any]) -> bool:
    try:
        app.clients.dynamodb.delete_item(**delete["Delete"])
    except ClientError as exc:
        if not condition_failed(exc):
            raise
        return False
    return True


def last_started(app: Leasehold, schedule: Schedule, now: int) -> Job | None:
    """The schedule's latest run that has started (None if none has, or it has expired).

    The run handed off last may still wait for its time: "last run" means this one. A query
    of the ``by_schedule`` index from now backwards, a page at a time (runs that did not
    start, e.g. cancelled before their time, are passed over; at most a few pages).
    """
    cursor = None
    for _ in range(5):
        ids, cursor = job_ids(app, schedule.schedule_id, limit=10, cursor=cursor,
                              before=iso(now + 1))
        started = [job for job in app.store.batch_get(ids) if job.first_started_at is not None
                   or job.started_at is not None]
        if started:
            return max(started, key=lambda job: job.extra.get("scheduled_for", ""))
        if cursor is None:
            return None
    return None
