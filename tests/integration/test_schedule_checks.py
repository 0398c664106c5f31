"""A schedule is checked as POST /jobs checks the jobs it will submit (issue 45): options the
job route refuses are refused when the schedule is written, not at every fire."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from leasehold.aws.dynamo import to_av
from leasehold.aws.faults import Fault
from leasehold.cli.schedules import show
from leasehold.clock import FakeClock, iso
from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold
from leasehold.time.ticker import retry_after, tick
from tests.integration.api_client import ApiClient
from tests.integration.helpers import inject

WRITES = "dynamodb.PutItem|dynamodb.TransactWriteItems|dynamodb.UpdateItem"


@pytest.fixture
def api(app: Leasehold, registry: TaskRegistry) -> ApiClient:
    registry.task("report")(lambda payload, ctx: payload)
    return ApiClient(app)


LONG = "k" * 201  # over the 200 characters of a rendered key, within the old 256
BAD: list[tuple[dict[str, Any], str]] = [
    ({"payload": {"a": 1}, "unique": {"key": "u:{payload.missing}"}}, "unique.key"),
    ({"unique": {"key": "u:{payload.missing}"}}, "unique.key"),
    ({"payload": {"a": 1}, "debounce": {"key": "d:{payload.missing}", "seconds": 5}},
     "debounce.key"),
    ({"payload": {"a": 1}, "unique": {"key": LONG}}, "unique.key"),
    ({"payload": {"a": 1}, "debounce": {"key": LONG, "seconds": 5}}, "debounce.key"),
    ({"unique": {"key": LONG}}, "unique.key"),
    ({"debounce": {"key": LONG, "seconds": 5}}, "debounce.key"),
    ({"unique": {"key": "u"}, "debounce": {"key": "d", "seconds": 5}}, "debounce"),
    ({"payload": {"a": 1}, "debounce": {"key": "d", "seconds": 60, "max_wait_seconds": 10}},
     "debounce.max_wait_seconds"),
]


@pytest.mark.parametrize(("options", "field"), BAD)
def test_a_schedule_with_options_post_jobs_refuses_is_a_422(
    api: ApiClient, options: dict[str, Any], field: str
) -> None:
    job = api.post("/jobs", {"task": "report", **options}, tenant="acme")
    assert job.status == 422, job.body
    created = api.post("/schedules", {"cron": "* * * * *", "task": "report", **options},
                       tenant="acme")
    assert created.status == 422, created.body
    assert created.body["error"]["field"] == field
    assert api.get("/schedules", tenant="acme").body["schedules"] == []


@pytest.mark.parametrize(("options", "field"), BAD)
def test_an_update_to_options_post_jobs_refuses_is_a_422(
    api: ApiClient, options: dict[str, Any], field: str
) -> None:
    created = api.post("/schedules", {"cron": "* * * * *", "task": "report",
                                      "payload": {"a": 1}}, tenant="acme")
    assert created.status == 201, created.body
    sid = created.body["schedule_id"]
    changes = options if "payload" in options else {"payload": None, **options}
    patched = api.call("PATCH", f"/schedules/{sid}", changes, tenant="acme")
    assert patched.status == 422, patched.body
    assert patched.body["error"]["field"] == field
    kept = api.get(f"/schedules/{sid}", tenant="acme").body
    assert kept["unique"] is None and kept["debounce"] is None


def test_a_key_the_payload_fills_is_accepted(api: ApiClient) -> None:
    created = api.post("/schedules", {"cron": "* * * * *", "task": "report",
                                      "payload": {"a": 1},
                                      "unique": {"key": "u:{payload.a}"}}, tenant="acme")
    assert created.status == 201, created.body


def test_a_schedule_that_fails_to_fire_records_why_and_backs_off(
    api: ApiClient, app: Leasehold, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    created = api.post("/schedules", {"cron": "* * * * *", "task": "report",
                                      "payload": {"a": 1}}, tenant="acme")
    sid = created.body["schedule_id"]
    # A row written before the checks above (or by hand): a window POST /jobs refuses.
    bad = {"debounce": {"key": "d", "seconds": 60, "max_wait_seconds": 10}}
    app.clients.dynamodb.update_item(
        TableName=app.settings.schedules_table, Key={"schedule_id": {"S": sid}},
        UpdateExpression="SET #t.#o = :o",
        ExpressionAttributeNames={"#t": "template", "#o": "options"},
        ExpressionAttributeValues=to_av({":o": bad}))
    clock.advance(30)
    caplog.set_level(logging.ERROR, logger="leasehold.time.ticker")
    assert tick(app).fired == 0
    failing = api.get(f"/schedules/{sid}", tenant="acme").body
    assert failing["failures"] == 1 and failing["state"] == "ACTIVE"
    assert failing["last_error"].startswith("ValidationError")
    assert "max_wait_seconds" in failing["last_error"] and "\n" not in failing["last_error"]
    assert failing["retry_at"] == iso(clock.now_ms() + 10_000)
    [record] = caplog.records
    assert record.exc_info is None and sid in record.getMessage()  # no traceback
    # Not tried again at every tick: within the back-off nothing is fired, written or logged.
    for _ in range(5):
        clock.advance(1)
        tick(app)
    again = api.get(f"/schedules/{sid}", tenant="acme").body
    assert again["failures"] == 1 and again["version"] == failing["version"]
    assert len(caplog.records) == 1
    # Past it, tried once more, and the wait doubles.
    clock.advance(10)
    tick(app)
    twice = api.get(f"/schedules/{sid}", tenant="acme").body
    assert twice["failures"] == 2 and twice["retry_at"] == iso(clock.now_ms() + 20_000)
    assert "2 time(s)" in show(twice) and "max_wait_seconds" in show(twice)
    # The owner fixes it: the failure is cleared and it fires at the next tick.
    fixed = api.call("PATCH", f"/schedules/{sid}",
                     {"debounce": {"key": "d", "seconds": 5}}, tenant="acme")
    assert fixed.status == 200 and fixed.body["failures"] == 0
    assert fixed.body["last_error"] is None and fixed.body["retry_at"] is None
    clock.advance(1)
    assert tick(app).fired >= 1
    assert api.get(f"/schedules/{sid}", tenant="acme").body["last_error"] is None


def test_retry_after_doubles_and_is_capped() -> None:
    assert [retry_after(n) for n in (1, 2, 3)] == [10.0, 20.0, 40.0]
    assert retry_after(50) == retry_after(1000) == 3600.0


def _to(table: str) -> Callable[[Mapping[str, Any]], bool]:
    def check(params: Mapping[str, Any]) -> bool:
        return params.get("TableName") == table or any(
            next(iter(item.values())).get("TableName") == table
            for item in params.get("TransactItems", []))
    return check


def test_a_fire_refused_by_the_store_is_recorded_and_retried_after_the_back_off(
    api: ApiClient, app: Leasehold, clock: FakeClock
) -> None:
    sid = api.post("/schedules", {"cron": "* * * * *", "task": "report", "payload": {"a": 1}},
                   tenant="acme").body["schedule_id"]
    injector = inject(app, Fault(target=WRITES, kind="fail", when=_to(app.settings.jobs_table)))
    clock.advance(30)
    assert tick(app).fired == 0 and sum(injector.injected.values()) == 1
    failing = api.get(f"/schedules/{sid}", tenant="acme").body
    assert failing["failures"] == 1 and failing["last_error"].startswith("ClientError")
    assert failing["next_fire_at"] == "2026-01-01T00:01:00.000Z"  # nothing skipped
    clock.advance(10)
    assert tick(app).fired == 2  # 00:01 and 00:02, as without the fault
    fired = api.get(f"/schedules/{sid}", tenant="acme").body
    assert fired["failures"] == 0 and fired["last_error"] is None and fired["run_count"] == 2


def test_a_lost_response_on_recording_the_failure_still_backs_off(
    api: ApiClient, app: Leasehold, clock: FakeClock
) -> None:
    sid = api.post("/schedules", {"cron": "* * * * *", "task": "report", "payload": {"a": 1}},
                   tenant="acme").body["schedule_id"]
    app.clients.dynamodb.update_item(
        TableName=app.settings.schedules_table, Key={"schedule_id": {"S": sid}},
        UpdateExpression="SET #t.#o = :o",
        ExpressionAttributeNames={"#t": "template", "#o": "options"},
        ExpressionAttributeValues=to_av({":o": {"unique": {"key": "{payload.gone}"}}}))
    # The record lands, its answer is lost, and botocore's retry meets its own write.
    inject(app, Fault(target="dynamodb.PutItem", kind="lose",
                      when=_to(app.settings.schedules_table)))
    clock.advance(30)
    tick(app)
    failing = api.get(f"/schedules/{sid}", tenant="acme").body
    assert failing["failures"] == 1 and "gone" in failing["last_error"]
    clock.advance(1)
    tick(app)
    assert api.get(f"/schedules/{sid}", tenant="acme").body["version"] == failing["version"]
