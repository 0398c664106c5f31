"""Schedules and triggers over the API (the handler driven with API Gateway proxy events)."""

from __future__ import annotations

import pytest

from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold
from leasehold.time.ticker import tick
from tests.integration.api_client import ApiClient


@pytest.fixture
def api(app: Leasehold, registry: TaskRegistry) -> ApiClient:
    registry.task("report")(lambda payload, ctx: payload)
    return ApiClient(app)


def test_schedule_lifecycle_over_the_api(api: ApiClient, clock: FakeClock) -> None:
    created = api.post("/schedules", {"name": "every minute", "cron": "* * * * *",
                                      "task": "report", "payload": {"v": 1}}, tenant="acme")
    assert created.status == 201, created.body
    sid = created.body["schedule_id"]
    assert created.body["next_fire_at"] == "2026-01-01T00:01:00.000Z"
    nxt = api.get(f"/schedules/{sid}/next?count=3", tenant="acme")
    assert nxt.body["times"] == ["2026-01-01T00:01:00.000Z", "2026-01-01T00:02:00.000Z",
                                 "2026-01-01T00:03:00.000Z"]
    clock.advance(30)
    tick(api.app)
    runs = api.get(f"/jobs?schedule_id={sid}", tenant="acme")
    assert runs.status == 200
    assert [j["scheduled_for"] for j in runs.body["jobs"]] == [
        "2026-01-01T00:02:00.000Z", "2026-01-01T00:01:00.000Z"]
    assert api.get(f"/jobs?schedule_id={sid}", tenant="other").status == 404
    patched = api.call("PATCH", f"/schedules/{sid}", {"cron": "@daily",
                                                       "timezone": "Europe/London"},
                       tenant="acme")
    assert patched.status == 200 and patched.body["cron"] == "@daily"
    assert api.post(f"/schedules/{sid}/pause", tenant="acme").body["state"] == "PAUSED"
    assert api.post(f"/schedules/{sid}/resume", tenant="acme").body["state"] == "ACTIVE"
    triggered = api.post(f"/schedules/{sid}/trigger", tenant="acme")
    assert triggered.status == 201 and triggered.body["schedule_id"] == sid
    listed = api.get("/schedules", tenant="acme")
    assert [s["schedule_id"] for s in listed.body["schedules"]] == [sid]
    assert api.delete(f"/schedules/{sid}", tenant="acme").status == 204
    assert api.get(f"/schedules/{sid}", tenant="acme").status == 404


@pytest.mark.parametrize(("body", "field"), [
    ({"cron": "every day", "task": "report"}, "cron"),
    ({"cron": "@daily", "timezone": "Moon/Base", "task": "report"}, "timezone"),
    ({"cron": "@daily", "task": "nope"}, "task"),
])
def test_an_invalid_schedule_is_a_422_naming_the_field(
    api: ApiClient, body: dict[str, str], field: str
) -> None:
    reply = api.post("/schedules", body, tenant="acme")
    assert reply.status == 422 and reply.body["error"]["field"] == field


def test_a_posted_event_fires_matching_triggers(api: ApiClient) -> None:
    created = api.post("/triggers", {"pattern": {"source": ["shop"]}, "task": "report",
                                     "input_path": "$.detail"}, tenant="acme")
    assert created.status == 201, created.body
    event = {"id": "e1", "source": "shop", "detail-type": "Order", "detail": {"n": 1}}
    first = api.post("/events", event, tenant="acme")
    assert first.status == 200 and len(first.body["job_ids"]) == 1
    job = api.get(f"/jobs/{first.body['job_ids'][0]}", tenant="acme").body
    assert job["payload"] == {"n": 1}
    assert api.post("/events", event, tenant="acme").body == first.body  # redelivery
    assert api.post("/events", {**event, "source": "crm"}, tenant="acme").body["job_ids"] == []
    bad = api.post("/triggers", {"pattern": {"source": "shop"}, "task": "report"}, tenant="acme")
    assert bad.status == 422 and bad.body["error"]["field"] == "pattern"
