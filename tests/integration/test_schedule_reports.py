"""What a schedule reports: its last *started* run (not the hand-off ahead), its runs without
withdrawn ones, and a pause that leaves no trail of CANCELLED rows (issue 25)."""

from __future__ import annotations

import pytest

from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold
from leasehold.time import schedules
from leasehold.time.ticker import tick
from tests.integration.api_client import ApiClient


@pytest.fixture
def api(app: Leasehold, registry: TaskRegistry) -> ApiClient:
    registry.task("report")(lambda payload, ctx: payload)
    return ApiClient(app)


def test_last_run_is_the_last_started_one_and_pause_leaves_no_cancelled_rows(
        api: ApiClient, clock: FakeClock) -> None:
    sid = api.post("/schedules", {"cron": "* * * * *", "task": "report"},
                   tenant="acme").body["schedule_id"]
    clock.advance(30)
    tick(api.app)  # 00:00:30: the 00:01 and 00:02 runs are handed off ahead, not started
    shown = api.get(f"/schedules/{sid}", tenant="acme").body
    assert shown["last_fired_at"] == "2026-01-01T00:02:00.000Z"  # the hand-off, ahead
    assert shown["last_started_at"] is None and shown["last_started_job_id"] is None
    clock.advance(31)  # 00:01:01: a worker takes the 00:01 run (moto keeps SQS delays in
    # real time, so the lease is taken here as the worker would take it)
    app = api.app
    [first] = [j for j in app.store.batch_get(schedules.job_ids(app, sid)[0])
               if j.extra["scheduled_for"] == "2026-01-01T00:01:00.000Z"]
    app.store.lease(first.job_id, first.epoch, owner="w", expires_at=app.now() + 30_000,
                    now=app.now(), actor="w")
    tick(api.app)  # hands off 00:02 (and maybe 00:03) ahead
    shown = api.get(f"/schedules/{sid}", tenant="acme").body
    runs = api.get(f"/jobs?schedule_id={sid}", tenant="acme").body["jobs"]
    started = [j for j in runs if j["started_at"] is not None]
    assert started and len(started) < len(runs)  # some still wait for their time
    assert shown["last_started_job_id"] == started[0]["job_id"]  # newest first
    assert shown["last_started_at"] == started[0]["started_at"]
    assert shown["last_fired_at"] > started[0]["scheduled_for"]
    paused = api.post(f"/schedules/{sid}/pause", tenant="acme").body
    assert paused["run_count"] == len(started)  # the ones ahead are withdrawn, uncounted
    after = api.get(f"/jobs?schedule_id={sid}", tenant="acme").body["jobs"]
    assert [j["job_id"] for j in after] == [j["job_id"] for j in started]
    listed = api.get("/jobs?state=CANCELLED", tenant="acme").body["jobs"]
    assert listed == []  # no trail in the main job list either
    running = api.get(f"/jobs?schedule_id={sid}&state=RUNNING&limit=5", tenant="acme").body
    assert [j["job_id"] for j in running["jobs"]] == [started[0]["job_id"]]
    assert api.get(f"/jobs?schedule_id={sid}&state=DEAD", tenant="acme").body["jobs"] == []


def test_next_fire_times_come_in_the_schedules_zone(api: ApiClient) -> None:
    sid = api.post("/schedules", {"cron": "0 9 * * *", "timezone": "Asia/Tokyo",
                                  "task": "report"}, tenant="acme").body["schedule_id"]
    reply = api.get(f"/schedules/{sid}/next?count=2", tenant="acme").body
    assert reply["timezone"] == "Asia/Tokyo"
    assert reply["times"] == ["2026-01-02T00:00:00.000Z", "2026-01-03T00:00:00.000Z"]
    assert reply["local_times"] == ["2026-01-02T09:00:00+09:00", "2026-01-03T09:00:00+09:00"]
