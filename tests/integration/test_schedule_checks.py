"""A schedule is checked as POST /jobs checks the jobs it will submit (issue 45): options the
job route refuses are refused when the schedule is written, not at every fire."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold
from tests.integration.api_client import ApiClient


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
