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

from leasehold.aws.definitions import BY_SCHEDULE_INDEX
from leasehold.aws.dynamo import query_page, to_av
from leasehold.clock import iso
from leasehold.core.ids import derived_id
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.time.schedule_model import Schedule
from leasehold.workflows import cancel_workflow, start_prepared
from leasehold.workflows.progress import workflow_store

ACTOR = "scheduler"


def run_id(schedule: Schedule, fire_at: int, *, manual: bool = False) -> str:
    """The id of an occurrence's run: the same for every tick that fires it."""
    return derived_id("schedule", schedule.schedule_id, str(schedule.config_version),
                      "manual" if manual else "cron", str(fire_at))


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


def job_ids(app: Leasehold, schedule_id: str, *, after: str | None = None, limit: int = 50,
            newest_first: bool = True, cursor: Mapping[str, Any] | None = None
            ) -> tuple[list[str], Mapping[str, Any] | None]:
    """Ids of the schedule's jobs from the sparse ``by_schedule`` index of the jobs table."""
    condition = "schedule_id = :s"
    values: dict[str, Any] = {":s": schedule_id}
    if after is not None:
        condition += " AND scheduled_for > :after"
        values[":after"] = after
    items, last = query_page(
        app.clients.dynamodb, limit=limit, cursor=cursor, TableName=app.settings.jobs_table,
        IndexName=BY_SCHEDULE_INDEX.name, KeyConditionExpression=condition,
        ExpressionAttributeValues=to_av(values), ScanIndexForward=not newest_first)
    return [item["job_id"] for item in items], last


def cancel_pending(app: Leasehold, schedule_id: str, now: int) -> list[str]:
    """Cancel the schedule's occurrences handed off ahead of time that have not started.

    Workflow runs are never started ahead, so a workflow schedule has none.
    """
    ids, _ = job_ids(app, schedule_id, after=iso(now), limit=500, newest_first=False)
    cancelled = []
    for job in app.store.batch_get(ids):
        if job.state in (JobState.SCHEDULED, JobState.QUEUED) and job.first_started_at is None \
                and cancel_quietly(app, job.job_id):
            cancelled.append(job.job_id)
    return cancelled
