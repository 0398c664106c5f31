"""What a schedule reports: its last *started* run (not the hand-off ahead), its runs without
withdrawn ones, and a pause that leaves no trail of CANCELLED rows (issue 25)."""

from __future__ import annotations

import pytest

from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold
from leasehold.time import schedules
from leasehold.time.ticker import tick
from tests.integration.api_client import ApiClient
from tests.integration.helpers import inject


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


@pytest.mark.parametrize("kind", ["lose", "lose-raise"])
def test_a_withdrawal_whose_response_is_lost_uncounts_its_run_once(
        app: Leasehold, registry: TaskRegistry, clock: FakeClock, kind: str) -> None:
    registry.task("report")(lambda payload, ctx: payload)
    schedule = schedules.create(app, {"cron": "* * * * *", "task": "report"}, tenant="acme")
    clock.advance(30)
    tick(app)
    ahead = schedules.job_ids(app, schedule.schedule_id)[0]
    assert len(ahead) == 2 and schedules.get(app, schedule.schedule_id).run_count == 2
    # The first withdrawal lands; its caller never hears so (botocore's retry meets the
    # deleted row, or the error outlasts the retries and the pause is asked again).
    inject(app, Fault(target="dynamodb.TransactWriteItems", kind=kind, times=1))
    try:
        schedules.pause(app, schedule.schedule_id, "acme")
    except Exception:
        assert kind == "lose-raise"
        schedules.pause(app, schedule.schedule_id, "acme")
    assert schedules.job_ids(app, schedule.schedule_id)[0] == []
    assert schedules.get(app, schedule.schedule_id).run_count == 0  # uncounted once each
