"""Schedules in moto with an injected clock: the ticker is driven by hand (EventBridge never
fires in moto), so every interleaving here is fixed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from leasehold.clock import FakeClock, iso
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.worker import Worker
from leasehold.time import schedules
from leasehold.time.schedules import ScheduleState
from leasehold.time.ticker import fire_schedule, tick
from tests.integration.helpers import deliver

M = 60_000


@pytest.fixture
def calls(registry: TaskRegistry) -> list[Any]:
    seen: list[Any] = []

    @registry.task("report")
    def report(payload: Any, ctx: Any) -> Any:
        seen.append(payload)
        return payload

    return seen


MakeSchedule = Callable[..., schedules.Schedule]


@pytest.fixture
def make_schedule(app: Leasehold, calls: list[Any]) -> MakeSchedule:
    def make(**body: Any) -> schedules.Schedule:
        return schedules.create(app, {"task": "report", "cron": "* * * * *", **body},
                                tenant="acme")

    return make


def jobs_of(app: Leasehold, schedule_id: str) -> list[Any]:
    ids, _ = schedules.job_ids(app, schedule_id, limit=1000, newest_first=False)
    return app.store.batch_get(ids)


def test_a_schedule_fires_one_tick_ahead_with_its_time_recorded(
    app: Leasehold, clock: FakeClock, make_schedule: MakeSchedule
) -> None:
    schedule = make_schedule(payload={"n": 1})  # created at 00:00:00
    assert schedule.next_fire_at == clock.now_ms() + M
    clock.advance(30)
    report = tick(app)
    jobs = jobs_of(app, schedule.schedule_id)
    # 00:01 and 00:02 fall due before now + 90 s: created now, each due at its own time.
    assert report.fired == 2
    assert [j.extra["scheduled_for"] for j in jobs] == [
        "2026-01-01T00:01:00.000Z", "2026-01-01T00:02:00.000Z"]
    assert [j.run_at for j in jobs] == [schedule.next_fire_at, schedule.next_fire_at + M]
    assert all(j.state is JobState.QUEUED and j.payload == {"n": 1} for j in jobs)
    assert jobs[0].view()["schedule_id"] == schedule.schedule_id
    stored = schedules.get(app, schedule.schedule_id)
    assert stored.next_fire_at == schedule.next_fire_at + 2 * M and stored.run_count == 2


@pytest.mark.ddblocal
def test_a_double_tick_creates_each_occurrence_once(
    app: Leasehold, clock: FakeClock, make_schedule: MakeSchedule
) -> None:
    schedule = make_schedule()
    clock.advance(30)
    first, second = tick(app), tick(app)
    assert (first.fired, second.fired) == (2, 0)
    assert len(jobs_of(app, schedule.schedule_id)) == 2


@pytest.mark.ddblocal
def test_concurrent_ticks_on_the_same_snapshot_create_each_occurrence_once(
    app: Leasehold, clock: FakeClock, make_schedule: MakeSchedule
) -> None:
    schedule = make_schedule()
    clock.advance(30)
    store = schedules.store_for(app)
    snapshot = store.get(schedule.schedule_id)
    from leasehold.time.ticker import TickReport

    a, b = TickReport(), TickReport()
    # Both read the schedule before either wrote it; A finishes first, then B.
    fire_schedule(app, store, snapshot, app.now(), 90_000, a)
    fire_schedule(app, store, snapshot, app.now(), 90_000, b)
    jobs = jobs_of(app, schedule.schedule_id)
    assert (a.fired, b.fired) == (2, 0)
    assert len(jobs) == 2 and all(j.state is JobState.QUEUED for j in jobs)  # none cancelled
    assert store.get(schedule.schedule_id).run_count == 2


@pytest.mark.ddblocal
def test_a_ticker_killed_between_jobs_and_cursor_loses_and_duplicates_nothing(
    app: Leasehold, clock: FakeClock, make_schedule: MakeSchedule, monkeypatch: pytest.MonkeyPatch
) -> None:
    schedule = make_schedule()
    clock.advance(30)
    real = schedules.fire_job
    made: list[str] = []

    def fire_then_die(*args: Any, **kwargs: Any) -> Any:
        if made:
            raise SystemExit("killed")  # the process dies after its first job
        result = real(*args, **kwargs)
        made.append(result[0].job_id)
        return result

    with monkeypatch.context() as patch:
        patch.setattr(schedules, "fire_job", fire_then_die)
        with pytest.raises(SystemExit):
            tick(app)
    assert len(jobs_of(app, schedule.schedule_id)) == 1
    clock.advance(1)
    tick(app)
    jobs = jobs_of(app, schedule.schedule_id)
    assert [j.extra["scheduled_for"] for j in jobs] == [
        "2026-01-01T00:01:00.000Z", "2026-01-01T00:02:00.000Z"]
    assert schedules.get(app, schedule.schedule_id).run_count == 2


def test_a_two_hour_outage_catches_up_a_bounded_number_of_runs(
    app: Leasehold, clock: FakeClock, make_schedule: MakeSchedule
) -> None:
    schedule = make_schedule(cron="*/15 * * * *", misfire_policy="catch_up", max_catch_up=3)
    clock.advance(2 * 3600)  # 00:15 ... 01:45 were missed; 02:00 is on time
    report = tick(app)
    times = [j.extra["scheduled_for"][11:16] for j in jobs_of(app, schedule.schedule_id)]
    assert times == ["01:15", "01:30", "01:45", "02:00"]
    assert report.misfired == 4
    assert schedules.get(app, schedule.schedule_id).skipped_count == 4


def test_pause_withdraws_runs_handed_off_ahead_and_resume_does_not_catch_up(
    app: Leasehold, clock: FakeClock, make_schedule: MakeSchedule
) -> None:
    schedule = make_schedule()
    clock.advance(30)
    tick(app)
    ahead = jobs_of(app, schedule.schedule_id)
    assert ahead and schedules.get(app, schedule.schedule_id).run_count == len(ahead)
    paused = schedules.pause(app, schedule.schedule_id, "acme")
    assert paused.state is ScheduleState.PAUSED
    # Withdrawn, not CANCELLED: no trail in the history or the job list, and not counted.
    assert jobs_of(app, schedule.schedule_id) == []
    assert app.store.batch_get([j.job_id for j in ahead]) == []
    assert paused.run_count == 0
    clock.advance(600)
    assert tick(app).fired == 0
    resumed = schedules.resume(app, schedule.schedule_id, "acme")
    assert resumed.next_fire_at == clock.now_ms() + 30_000  # 00:11, not the missed 00:01...
    clock.advance(1)
    assert tick(app).fired == 2


def test_trigger_runs_now_once_and_respects_forbid(
    app: Leasehold, clock: FakeClock, make_schedule: MakeSchedule, calls: list[Any]
) -> None:
    schedule = make_schedule(cron="@daily", overlap_policy="forbid", payload="x")
    job = schedules.trigger(app, schedule.schedule_id, "acme")
    assert job.state is JobState.QUEUED and job.run_at == clock.now_ms()
    assert job.extra["scheduled_for"] == iso(clock.now_ms())
    with pytest.raises(Conflict):
        schedules.trigger(app, schedule.schedule_id, "acme")  # the first is still live
    deliver(app, Worker(app))
    assert calls == ["x"]
    assert schedules.get(app, schedule.schedule_id).next_fire_at == schedule.next_fire_at
    clock.advance(1)
    assert schedules.trigger(app, schedule.schedule_id, "acme").job_id != job.job_id


def test_update_in_place_changes_cron_zone_and_payload_together(
    app: Leasehold, clock: FakeClock, make_schedule: MakeSchedule
) -> None:
    schedule = make_schedule(payload={"v": 1})
    clock.advance(30)
    tick(app)
    old = jobs_of(app, schedule.schedule_id)
    updated = schedules.update(app, schedule.schedule_id,
                               {"cron": "30 9 * * *", "timezone": "Asia/Kolkata",
                                "payload": {"v": 2}}, "acme")
    # 09:30 in Kolkata is 04:00Z; the runs handed off under the old cron are withdrawn.
    assert iso(updated.next_fire_at) == "2026-01-01T04:00:00.000Z"
    assert old and app.store.batch_get([j.job_id for j in old]) == []
    assert updated.run_count == 0
    clock.set(updated.next_fire_at - 30_000)
    tick(app)
    fresh = [j for j in jobs_of(app, schedule.schedule_id) if j.state is JobState.QUEUED]
    assert [(j.payload, j.extra["scheduled_for"]) for j in fresh] == [
        ({"v": 2}, "2026-01-01T04:00:00.000Z")]


@pytest.mark.ddblocal
def test_a_user_change_racing_a_tick_cancels_what_the_tick_made_for_the_old_config(
    app: Leasehold, clock: FakeClock, make_schedule: MakeSchedule
) -> None:
    schedule = make_schedule()
    clock.advance(30)
    store = schedules.store_for(app)
    snapshot = store.get(schedule.schedule_id)
    schedules.pause(app, schedule.schedule_id, "acme")  # lands between the read and the fire
    from leasehold.time.ticker import TickReport

    report = TickReport()
    fire_schedule(app, store, snapshot, app.now(), 90_000, report)
    assert report.fired_job_ids and jobs_of(app, schedule.schedule_id) == []  # withdrawn
    assert store.get(schedule.schedule_id).state is ScheduleState.PAUSED


def test_overlap_replace_cancels_the_previous_run(
    app: Leasehold, clock: FakeClock, make_schedule: MakeSchedule
) -> None:
    schedule = make_schedule(overlap_policy="replace")
    clock.advance(30)
    tick(app)  # 00:01 is created ahead (the previous run, none, is not live)
    first = jobs_of(app, schedule.schedule_id)
    assert len(first) == 1
    clock.advance(61)  # 00:01:31: 00:01's run never started; 00:02 is due in 29 s
    tick(app)  # previous live and 00:02 not due yet: it waits
    assert len(jobs_of(app, schedule.schedule_id)) == 1
    clock.advance(30)  # 00:02:01: due; the previous is still live, so it is replaced
    tick(app)
    jobs = jobs_of(app, schedule.schedule_id)
    assert [j.state for j in jobs] == [JobState.CANCELLED, JobState.QUEUED]
    assert jobs[1].extra["scheduled_for"] == "2026-01-01T00:02:00.000Z"


@pytest.mark.ddblocal
def test_overlap_forbid_skips_while_the_previous_run_is_live(
    app: Leasehold, clock: FakeClock, make_schedule: MakeSchedule
) -> None:
    schedule = make_schedule(overlap_policy="forbid")
    clock.advance(30)
    tick(app)
    clock.advance(91)  # 00:02:01; 00:01's run is still queued (no worker ran)
    report = tick(app)
    assert report.fired == 0 and report.misfired == 1
    assert len(jobs_of(app, schedule.schedule_id)) == 1
    assert schedules.get(app, schedule.schedule_id).next_fire_at == schedule.next_fire_at + 2 * M


def test_max_runs_completes_the_schedule(
    app: Leasehold, clock: FakeClock, make_schedule: MakeSchedule
) -> None:
    schedule = make_schedule(cron="rate(1 minute)", max_runs=3)
    assert schedules.preview(app, schedule.schedule_id, 10) == [
        schedule.next_fire_at + i * M for i in range(3)]
    for _ in range(5):
        clock.advance(60)
        tick(app)
    assert len(jobs_of(app, schedule.schedule_id)) == 3
    done = schedules.get(app, schedule.schedule_id)
    assert done.state is ScheduleState.COMPLETED and done.next_fire_at is None


def test_other_tenants_cannot_see_or_change_a_schedule(
    app: Leasehold, make_schedule: MakeSchedule
) -> None:
    schedule = make_schedule()
    for action in (schedules.get, schedules.pause, schedules.trigger, schedules.delete):
        with pytest.raises(NotFound):
            action(app, schedule.schedule_id, "other")
    listed, _ = schedules.list_schedules(app, "acme")
    assert [s.schedule_id for s in listed] == [schedule.schedule_id]
    assert schedules.list_schedules(app, "other")[0] == []


def test_delete_withdraws_pending_runs_and_stops_firing(
    app: Leasehold, clock: FakeClock, make_schedule: MakeSchedule
) -> None:
    schedule = make_schedule()
    clock.advance(30)
    tick(app)
    schedules.delete(app, schedule.schedule_id, "acme")
    with pytest.raises(NotFound):
        schedules.get(app, schedule.schedule_id)
    assert jobs_of(app, schedule.schedule_id) == []
    clock.advance(120)
    assert tick(app).fired == 0
