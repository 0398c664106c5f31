"""Schedules: validation (errors name the field) and what users and the ticker do with them.

The model is :mod:`leasehold.time.schedule_model`; the table, :mod:`~leasehold.time.
schedule_store`; the runs a schedule starts, :mod:`~leasehold.time.schedule_runs`. Every
write replaces the whole item on the condition of its ``version``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from leasehold.clock import iso, to_ms
from leasehold.core.durations import check_seconds
from leasehold.core.ids import new_id
from leasehold.core.jobs import Job
from leasehold.core.spec import check_number, check_tenant, check_text
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound, ValidationError
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import Submitted, new_job, through_intakes
from leasehold.time.cron import parse, zone
from leasehold.time.firing import MisfirePolicy, OverlapPolicy
from leasehold.time.schedule_model import (
    FIELDS,
    MAX_CATCH_UP,
    MAX_JITTER_SECONDS,
    MAX_PREVIEW,
    TARGET_FIELDS,
    TEMPLATE_FIELDS,
    TIMING_FIELDS,
    Schedule,
    ScheduleState,
)
from leasehold.time.schedule_runs import (
    cancel_pending,
    cancel_run,
    fire_workflow,
    previous_live,
    run_id,
)
from leasehold.time.schedule_runs import (
    job_ids as job_ids,  # re-exported: the API and tests list a schedule's jobs here
)
from leasehold.time.schedule_store import DynamoScheduleStore, ScheduleStore
from leasehold.time.templates import resolve_target
from leasehold.workflows import WorkflowDetail, get_workflow

# -- validation ----------------------------------------------------------------------------

_LAST_MS = 253_402_300_799_000  # 9999-12-31T23:59:59Z


def _time(fieldname: str, value: Any) -> int | None:
    """Epoch ms from an ISO-8601 string with a zone, or from epoch ms; None stays None."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise ValidationError(fieldname, f"not an ISO-8601 time: {value!r}") from None
        if parsed.tzinfo is None:
            raise ValidationError(fieldname, "must carry a zone (e.g. 'Z' or '+01:00')")
        return to_ms(parsed)
    check_number(fieldname, value, low=-math.inf, high=math.inf, integer=True)
    if not 0 <= value <= _LAST_MS:  # said in dates: nobody reads epoch milliseconds
        raise ValidationError(fieldname, "must be between 1970-01-01T00:00:00Z and "
                                         "9999-12-31T23:59:59Z")
    return int(value)


def _or(values: Mapping[str, Any], name: str, default: Any) -> Any:
    value = values.get(name)
    return default if value is None else value


def _enum(fieldname: str, kind: type[StrEnum], value: Any) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise ValidationError(fieldname, "must be one of " + ", ".join(k.value for k in kind)
                              ) from None


def _optional_int(fieldname: str, value: Any, low: int, high: int) -> int | None:
    return None if value is None else int(check_number(fieldname, value, low=low, high=high,
                                                       integer=True))


def build(app: Leasehold, body: Mapping[str, Any], *, tenant: str, now: int,
          base: Schedule | None = None) -> Schedule:
    """A valid schedule from a request body (or ``base`` with ``body``'s changes)."""
    unknown = set(body) - FIELDS
    if unknown:
        name = sorted(unknown)[0]
        raise ValidationError(name, "is not a schedule field")
    current = base.view() if base is not None else {}
    values = {**current, **body}
    name = check_text("name", values.get("name") or "", limit=128,
                      empty_ok=True)
    expression = parse(values.get("cron"), "cron")
    tz = values.get("timezone") or "UTC"
    zone(tz, "timezone")
    start_at = _time("start_at", values.get("start_at"))
    end_at = _time("end_at", values.get("end_at"))
    if start_at is not None and end_at is not None and end_at <= start_at:
        raise ValidationError("end_at", "must be after start_at")
    template, workflow = resolve_target(
        app.registry, pools=app.settings.pools, now=now, tenant=check_tenant(tenant),
        body=body, values=values, job_fields=TEMPLATE_FIELDS & set(body),
        current=(base.template, base.workflow) if base else None,
        timeout_limits=app.settings.job_timeout_limits())
    jitter = check_seconds("jitter_seconds", values.get("jitter_seconds") or 0,
                           high=MAX_JITTER_SECONDS, zero_ok=True)
    if workflow is not None and jitter:
        raise ValidationError("jitter_seconds", "a workflow starts when it is due (its steps "
                                                "cannot be delayed); leave jitter out")
    schedule = Schedule(
        schedule_id=base.schedule_id if base else "", tenant=tenant, name=name,
        cron=expression.text, timezone=tz, template=template, workflow=workflow,
        misfire_policy=_enum("misfire_policy", MisfirePolicy,
                             values.get("misfire_policy") or MisfirePolicy.FIRE_ONCE),
        overlap_policy=_enum("overlap_policy", OverlapPolicy,
                             values.get("overlap_policy") or OverlapPolicy.ALLOW),
        starting_deadline_seconds=float(check_number(
            "starting_deadline_seconds", _or(values, "starting_deadline_seconds", 300.0),
            low=1, high=366 * 86400)),
        max_catch_up=int(check_number("max_catch_up", _or(values, "max_catch_up", 10), low=0,
                                      high=MAX_CATCH_UP, integer=True)),
        start_at=start_at, end_at=end_at,
        max_runs=_optional_int("max_runs", values.get("max_runs"), 1, 10**9),
        jitter_seconds=jitter, created_at=base.created_at if base else now, updated_at=now,
    )
    if base is not None:
        schedule = replace(
            schedule, state=base.state, next_fire_at=base.next_fire_at,
            run_count=base.run_count, skipped_count=base.skipped_count,
            last_fired_at=base.last_fired_at, last_job_id=base.last_job_id,
            version=base.version, config_version=base.config_version)
    return schedule


# -- what users do -------------------------------------------------------------------------

def store_for(app: Leasehold) -> ScheduleStore:
    return DynamoScheduleStore(app.clients, app.settings)


def _settle(schedule: Schedule, now: int, *, replan: bool) -> Schedule:
    """State and cursor after a change: re-planned from ``now`` if its timing changed."""
    if schedule.state is ScheduleState.PAUSED:
        return schedule
    cursor = schedule.next_fire_at
    if replan or schedule.state is ScheduleState.COMPLETED or cursor is None:
        cursor = schedule.timing().next_after(now)
    if cursor is None or (schedule.max_runs is not None
                          and schedule.run_count >= schedule.max_runs):
        return replace(schedule, state=ScheduleState.COMPLETED, next_fire_at=None)
    return replace(schedule, state=ScheduleState.ACTIVE, next_fire_at=cursor)


def create(app: Leasehold, body: Mapping[str, Any], *, tenant: str) -> Schedule:
    """Validate and store a new schedule; it fires from its first time after now."""
    now = app.now()
    schedule = build(app, body, tenant=tenant, now=now)
    schedule = _settle(replace(schedule, schedule_id=new_id(now)), now, replan=True)
    store_for(app).create(schedule)
    return schedule


def get(app: Leasehold, schedule_id: str, tenant: str | None = None) -> Schedule:
    """The schedule, or NotFound (also for another tenant's schedule)."""
    schedule = store_for(app).get(schedule_id)
    if tenant is not None and schedule.tenant != tenant:
        raise NotFound(f"no schedule {schedule_id}", schedule_id=schedule_id)
    return schedule


def list_schedules(app: Leasehold, tenant: str, *, limit: int = 50,
                   cursor: Mapping[str, Any] | None = None
                   ) -> tuple[list[Schedule], Mapping[str, Any] | None]:
    return store_for(app).by_tenant(tenant, limit=limit, cursor=cursor)


def _change(app: Leasehold, schedule_id: str, tenant: str | None,
            edit: Callable[[Schedule, int], Schedule]) -> tuple[Schedule, Schedule]:
    """Apply ``edit`` with optimistic concurrency; (before, after)."""
    store = store_for(app)
    for _ in range(5):  # a tick may advance the cursor between our read and our write
        current = get(app, schedule_id, tenant)
        now = app.now()
        new = edit(current, now)
        new = replace(new, version=current.version + 1,
                      config_version=current.config_version + 1, updated_at=now)
        try:
            store.save(new, expected_version=current.version)
        except Conflict:
            continue
        return current, new
    raise Conflict(f"schedule {schedule_id} kept changing; try again", schedule_id=schedule_id)


def update(app: Leasehold, schedule_id: str, body: Mapping[str, Any],
           tenant: str | None = None) -> Schedule:
    """Change fields in place. Cron, zone and payload change in one write (atomically);
    occurrences already handed off under the old timing or payload are cancelled."""
    replan = bool((TIMING_FIELDS | TARGET_FIELDS) & set(body))

    def edit(current: Schedule, now: int) -> Schedule:
        return _settle(build(app, body, tenant=current.tenant, now=now, base=current), now,
                       replan=replan or bool({"max_runs", "end_at"} & set(body)))

    before, after = _change(app, schedule_id, tenant, edit)
    if replan and cancel_pending(app, before.schedule_id, after.updated_at):
        return get(app, schedule_id, tenant)  # withdrawn runs are uncounted
    return after


def pause(app: Leasehold, schedule_id: str, tenant: str | None = None) -> Schedule:
    """Stop firing; occurrences already handed off ahead of their time are withdrawn
    (deleted and uncounted: they were never runs)."""
    _, after = _change(app, schedule_id, tenant,
                       lambda s, now: replace(s, state=ScheduleState.PAUSED))
    if cancel_pending(app, schedule_id, after.updated_at):
        return get(app, schedule_id, tenant)  # withdrawn runs are uncounted
    return after


def resume(app: Leasehold, schedule_id: str, tenant: str | None = None) -> Schedule:
    """Fire again from the next time after now; times that passed while paused are not
    misfires (the owner chose to pause), so none are caught up."""
    def edit(current: Schedule, now: int) -> Schedule:
        if current.state is not ScheduleState.PAUSED:
            return current
        return _settle(replace(current, state=ScheduleState.ACTIVE), now, replan=True)

    return _change(app, schedule_id, tenant, edit)[1]


def delete(app: Leasehold, schedule_id: str, tenant: str | None = None) -> None:
    """Delete the schedule and cancel its occurrences that have not started."""
    store = store_for(app)
    for _ in range(5):
        current = get(app, schedule_id, tenant)
        try:
            store.delete(schedule_id, expected_version=current.version)
            break
        except Conflict:
            continue
    else:
        raise Conflict(f"schedule {schedule_id} kept changing; try again",
                       schedule_id=schedule_id)
    cancel_pending(app, schedule_id, app.now())


def preview(app: Leasehold, schedule_id: str, count: int, tenant: str | None = None
            ) -> list[int]:
    """The next ``count`` fire times after now (bounded by end_at and max_runs)."""
    check_number("count", count, low=1, high=MAX_PREVIEW, integer=True)
    schedule = get(app, schedule_id, tenant)
    if schedule.max_runs is not None:
        count = min(count, max(0, schedule.max_runs - schedule.run_count))
    return schedule.timing().upcoming(app.now(), count)


def trigger(app: Leasehold, schedule_id: str, tenant: str | None = None
            ) -> Job | WorkflowDetail:
    """Run the schedule's job (or workflow) now, once, under its overlap policy; the cursor
    is untouched."""
    store = store_for(app)
    for _ in range(5):
        schedule = get(app, schedule_id, tenant)
        now = app.now()
        previous = previous_live(app, schedule)
        if previous is not None and schedule.overlap_policy is OverlapPolicy.FORBID:
            raise Conflict(f"the previous run {previous} is still live (overlap forbid)",
                           schedule_id=schedule_id, job_id=previous)
        if previous is not None and schedule.overlap_policy is OverlapPolicy.REPLACE:
            cancel_run(app, schedule, previous)
        run, _ = fire(app, schedule, now, now, now, manual=True)
        try:
            store.save(replace(schedule, last_job_id=run, version=schedule.version + 1),
                       expected_version=schedule.version)
        except Conflict:
            continue  # a tick moved the cursor: record the run on the fresh copy
        return get_workflow(app, run) if schedule.workflow else app.store.get(run)
    raise Conflict(f"schedule {schedule_id} kept changing; try again", schedule_id=schedule_id)


# -- runs of a schedule (the rest of them live in ``schedule_runs``) -------------------------

def fire(app: Leasehold, schedule: Schedule, fire_at: int, run_at: int, now: int, *,
         manual: bool = False) -> tuple[str, bool]:
    """Start (once) the run of one occurrence, a job or a workflow; (its id, created)."""
    if schedule.workflow is not None:
        return fire_workflow(app, schedule, fire_at, now, manual=manual)
    job, created = fire_job(app, schedule, fire_at, run_at, now, manual=manual)
    return job.job_id, created


def fire_job(app: Leasehold, schedule: Schedule, fire_at: int, run_at: int, now: int, *,
             manual: bool = False) -> tuple[Job, bool]:
    """Create (once) and hand off the job of one occurrence; (job, created)."""
    if schedule.template is None:
        raise ValueError(f"schedule {schedule.schedule_id} starts a workflow, not a job")
    job = new_job(app, schedule.template.to_resolved(run_at), now,
                  job_id=run_id(schedule, fire_at, manual=manual),
                  actor="scheduler", extra={"schedule_id": schedule.schedule_id,
                                            "scheduled_for": iso(fire_at)})

    def create(row: Job, writes: Sequence[Mapping[str, Any]]) -> Submitted:
        stored, created = app.store.create(row, also=writes)
        if created or (stored.state is JobState.QUEUED and stored.first_started_at is None):
            # Not created: another tick made it, or we did before a crash and may have died
            # before the send. Sending again is safe: both messages carry one epoch, and the
            # lease condition lets only one of them start the job.
            handoff.send(app.queues, stored, now)
        return Submitted(stored, created=created)

    # The submission's intakes, as for POST /jobs: a unique key answers with the live job
    # (the occurrence is skipped while it runs), a debounce window takes it in, a start
    # window is set; the task's own defaults apply the same way.
    made = through_intakes(app, schedule.template.intake_spec(), create)(job, ())
    return made.job, made.created
