"""The ticker: promotes SCHEDULED jobs and fires schedules that fall due before the next tick.

It reads the sparse ``due`` indexes only (one query per shard of the jobs table and of the
schedules table), so its cost grows with the number of due jobs and schedules, never with
the number stored. Whatever falls due before the next tick is handed off now with
``DelaySeconds``, so it starts within about a second of its time although the Lambda ticker
runs once a minute.

Every step is safe to repeat: promotion is a fenced transition, a schedule's occurrence is a
job whose id derives from (schedule, configuration, fire time) created by a conditional put,
and the schedule's cursor moves by a write conditional on its version. A double tick, two
concurrent tickers, or a ticker killed half-way (re-run by the next tick) create each job once.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field, replace

from leasehold.clock import iso
from leasehold.core.pacing import IdlePacing
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change
from leasehold.time import firing, schedules
from leasehold.time.firing import OverlapPolicy
from leasehold.time.leader import LeaderLease
from leasehold.time.schedule_runs import withdraw_uncounted
from leasehold.time.schedule_store import ScheduleStore
from leasehold.time.schedules import Schedule, ScheduleState

log = logging.getLogger(__name__)
ACTOR = "ticker"
LOOKAHEAD_SECONDS = 90.0


@dataclass
class PromoteReport:
    promoted: int = 0
    skipped: int = 0
    job_ids: list[str] = field(default_factory=list)


@dataclass
class TickReport(PromoteReport):
    #: Due schedules examined, runs they fired, occurrences dropped by a policy.
    schedules: int = 0
    fired: int = 0
    misfired: int = 0
    #: Ids of the runs fired: jobs, and workflows for schedules that start one.
    fired_job_ids: list[str] = field(default_factory=list)
    #: Due schedules left unfired because this cell may not take their tenant's new work
    #: (cells: the tenant is homed in another Region, or this cell is fenced).
    away: int = 0


def promote_due(app: Leasehold, *, lookahead_seconds: float = LOOKAHEAD_SECONDS,
                limit_per_shard: int = 1000, report: PromoteReport | None = None
                ) -> PromoteReport:
    now = app.now()
    until = now + int(min(lookahead_seconds, handoff.MAX_DELAY_SECONDS) * 1000)
    report = report if report is not None else PromoteReport()
    for shard in range(app.settings.shards):
        for job_id in app.store.due(shard, until, limit_per_shard):
            try:
                job = app.store.get(job_id)
                if job.state not in (JobState.SCHEDULED, JobState.SLEEPING):
                    report.skipped += 1
                    continue
                change = Change(
                    target=JobState.QUEUED, actor=ACTOR, bump_epoch=True,
                    reason="due" if job.state is JobState.SCHEDULED else "woken",
                    # From now, not from run_at: after a ticker outage a deadline counted from
                    # a run_at long past would make the sweeper re-send the job at once.
                    set={"lease_expires_at": handoff.handoff_deadline(max(job.run_at, now),
                                                                      app.settings)},
                )
                new = app.store.transition(job, change, now=now)
            except (Conflict, NotFound):
                report.skipped += 1  # a concurrent tick or a cancel got there first
                continue
            handoff.send(app.queues, new, now)
            report.promoted += 1
            report.job_ids.append(job_id)
    return report


def fire_schedules(app: Leasehold, *, lookahead_seconds: float = LOOKAHEAD_SECONDS,
                   limit_per_shard: int = 500, report: TickReport | None = None) -> TickReport:
    """Fire every ACTIVE schedule whose next time falls before ``now + lookahead``."""
    now = app.now()
    lookahead_ms = int(min(lookahead_seconds, handoff.MAX_DELAY_SECONDS) * 1000)
    report = report if report is not None else TickReport()
    store = schedules.store_for(app)
    for shard in range(app.settings.shards):
        for schedule_id in store.due(shard, now + lookahead_ms, limit_per_shard):
            try:
                schedule = store.get(schedule_id)
            except NotFound:
                continue  # deleted since the index saw it
            if schedule.state is not ScheduleState.ACTIVE or schedule.next_fire_at is None:
                continue
            if schedule.retry_at is not None and now < schedule.retry_at:
                continue  # failing: backing off
            if not app.homed_here(schedule.tenant, now):
                # Cells: a schedule fires only in its tenant's home. Its cursor stays, so
                # when the tenant comes back (failback) its misfire policy decides what the
                # occurrences missed meanwhile become, as after a ticker outage.
                report.away += 1
                continue
            report.schedules += 1
            try:
                fire_schedule(app, store, schedule, now, lookahead_ms, report)
            except Exception as exc:
                # One broken schedule must not stop the others; it is tried again later.
                _failed(store, schedule, exc, now)
    return report


#: A failing schedule is tried again after this, doubled for each further failure, capped.
RETRY_BASE_SECONDS = 10.0
RETRY_CAP_SECONDS = 3600.0
MAX_ERROR_CHARS = 500


def retry_after(failures: int) -> float:
    """Seconds before a schedule that failed ``failures`` times in a row is tried again."""
    return min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2 ** min(failures - 1, 30))


def _failed(store: ScheduleStore, schedule: Schedule, exc: Exception, now: int) -> None:
    """Record why the fire failed on the schedule (one line, no traceback) and when to try
    again, instead of failing at every tick; a write that loses a race (a user's change, a
    concurrent tick) is left to the winner."""
    message = (f"{type(exc).__name__}: {exc}".splitlines() or [""])[0][:MAX_ERROR_CHARS]
    failures = schedule.failures + 1
    retry_at = now + int(retry_after(failures) * 1000)
    log.error("firing schedule %s failed (%d in a row; next try %s): %s",
              schedule.schedule_id, failures, iso(retry_at), message)
    try:
        store.save(replace(schedule, failures=failures, last_error=message,
                           last_error_at=now, retry_at=retry_at,
                           version=schedule.version + 1),
                   expected_version=schedule.version)
    except Exception as lost:  # the next tick sees the schedule again
        log.error("could not record the failure of schedule %s: %s",
                  schedule.schedule_id, lost)


def fire_schedule(app: Leasehold, store: ScheduleStore, schedule: Schedule, now: int,
                  lookahead_ms: int, report: TickReport) -> None:
    previous = None
    if schedule.overlap_policy is not OverlapPolicy.ALLOW:
        previous = schedules.previous_live(app, schedule)
    if schedule.workflow is not None:
        # A workflow starts when it is due, never ahead: its roots are released at once and
        # cannot wait in SQS, so it fires at the first tick at or after its time.
        lookahead_ms = 0
    plan = firing.plan(schedule.rules(), next_fire_at=schedule.next_fire_at,
                       run_count=schedule.run_count, now=now, lookahead_ms=lookahead_ms,
                       previous_live=previous is not None)
    if plan.unchanged:
        return
    if plan.cancel_previous and previous is not None:
        schedules.cancel_run(app, schedule, previous)
    # Runs first, cursor second: a crash in between re-plans the same occurrences at the
    # next tick, whose conditional puts find the jobs (or workflows) already made.
    created: list[tuple[str, int]] = []
    last_job_id = schedule.last_job_id
    for occurrence in plan.fire:
        run, was_created = schedules.fire(app, schedule, occurrence.fire_at, occurrence.run_at,
                                          now)
        last_job_id = run
        if was_created:
            created.append((run, occurrence.fire_at))
            report.fired_job_ids.append(run)
    report.fired += len(created)
    report.misfired += plan.skipped
    new = replace(
        schedule, next_fire_at=plan.next_fire_at,
        state=ScheduleState.COMPLETED if plan.next_fire_at is None else ScheduleState.ACTIVE,
        run_count=schedule.run_count + len(plan.fire),
        skipped_count=schedule.skipped_count + plan.skipped,
        last_fired_at=plan.fire[-1].fire_at if plan.fire else schedule.last_fired_at,
        last_job_id=last_job_id, version=schedule.version + 1,
        failures=0, last_error=None, last_error_at=None, retry_at=None,
    )
    try:
        store.save(new, expected_version=schedule.version)
    except Conflict:
        _lost_race(app, store, schedule, created, now)


def _lost_race(app: Leasehold, store: ScheduleStore, schedule: Schedule,
               created: list[tuple[str, int]], now: int) -> None:
    """Someone wrote the schedule while we fired it.

    Another tick planned the same occurrences (the jobs are the same ones: nothing to do).
    A user's pause, update or delete changed the configuration after we read it: the jobs we
    just made for the future belong to the old one, so withdraw them as the user's change did
    (they were never counted: our save failed; workflows are never started ahead, so this
    never touches one).
    """
    try:
        edited = store.get(schedule.schedule_id).config_version != schedule.config_version
    except NotFound:
        edited = True
    if edited:
        for job_id, fire_at in created:
            if fire_at > now:
                withdraw_uncounted(app, job_id)


def tick(app: Leasehold, *, lookahead_seconds: float = LOOKAHEAD_SECONDS) -> TickReport:
    """One pass of the ticker, as EventBridge (or a local loop) drives it."""
    report = TickReport()
    with app.batch():  # the pass's job state events go out together when it ends
        promote_due(app, lookahead_seconds=lookahead_seconds, report=report)
        fire_schedules(app, lookahead_seconds=lookahead_seconds, report=report)
    return report


def found_work(report: TickReport) -> bool:
    """Whether a tick's due queries returned anything (jobs or schedules, fired or not).
    Schedules left to another cell do not count: nothing here can fire them, and when
    their tenant comes back the idle pace (at most half the look-ahead) finds them."""
    return bool(report.promoted or report.skipped or report.schedules)


def run(app: Leasehold, stop: threading.Event, *, interval_seconds: float = 1.0,
        lease: LeaderLease | None = None,
        lookahead_seconds: float = LOOKAHEAD_SECONDS,
        idle_interval_seconds: float | None = None,
        wake: threading.Event | None = None) -> None:
    """Tick every ``interval_seconds`` until ``stop`` is set (local runtime, ECS).

    With a ``lease`` only the holder ticks, so a fleet of loops costs one ticker's reads; a
    standby takes over within one lease period of the leader's death. Ticks are idempotent,
    so a brief overlap of two leaders (clock skew) is harmless. The leader renews its lease
    before each tick and every third of a lease period between ticks, however slow its pace.

    With ``idle_interval_seconds`` a tick whose due queries return nothing doubles the wait
    before the next, up to that (and never beyond half the look-ahead: whatever falls due
    before the next tick was then already beyond this tick's look-ahead, so the next tick
    still hands it off ahead of its time). Work written by others is due at least
    ``MAX_DELAY_SECONDS`` ahead (nearer work goes to SQS directly), so it is never late
    either. ``wake`` (set, e.g., when an API writes a schedule) makes the loop tick at once
    (at most once per ``interval_seconds``) and return to its base pace; the caller sets it
    on stop too, as the loop sleeps on it.
    """
    cap = interval_seconds if idle_interval_seconds is None else \
        min(idle_interval_seconds, lookahead_seconds / 2)
    pace = IdlePacing(interval_seconds, cap)
    alarm = wake if wake is not None else stop
    renew_every = lease.lease_ms / 3000 if lease is not None else math.inf
    renewed_at: float | None = None
    last_tick = -math.inf
    next_tick = time.monotonic()
    try:
        while not stop.is_set():
            now = time.monotonic()
            if wake is not None and wake.is_set():
                wake.clear()
                pace.wake()
                next_tick = min(next_tick, last_tick + interval_seconds)
            leading = True
            # Renewed right before each tick (a long tick then starts with a whole lease) and
            # every third of a lease between ticks.
            if lease is not None and (renewed_at is None or now - renewed_at >= renew_every
                                      or now >= next_tick):
                leading = lease.acquire()
                renewed_at = now if leading else None
            if not leading:
                alarm.wait(interval_seconds)  # a standby asks again at the base pace
                continue
            if now >= next_tick:
                last_tick = now
                try:
                    found = found_work(tick(app, lookahead_seconds=lookahead_seconds))
                except Exception:
                    log.exception("tick failed; the next one retries")
                    found = True  # retry at the base pace
                next_tick = time.monotonic() + pace.after(found)
            until = next_tick if renewed_at is None else min(next_tick, renewed_at + renew_every)
            alarm.wait(max(0.0, until - time.monotonic()))
    finally:
        if lease is not None:
            lease.release()
