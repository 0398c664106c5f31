"""Schedule validation: every bad value is refused before anything is written, naming its field.

``build`` needs the task registry and settings only, so these run without AWS.
"""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.clock import FakeClock
from leasehold.compose import compose
from leasehold.core.registry import TaskRegistry
from leasehold.errors import ValidationError
from leasehold.lifecycle.app import Leasehold
from leasehold.settings import Settings
from leasehold.time.schedules import Schedule, build


@pytest.fixture
def offline_app(registry: TaskRegistry, clock: FakeClock) -> Leasehold:
    registry.task("report", pool="default")(lambda payload, ctx: payload)
    return compose(Settings(), clock=clock, registry=registry)


def make(app: Leasehold, **body: Any) -> Schedule:
    return build(app, {"task": "report", "cron": "* * * * *", **body}, tenant="acme",
                 now=app.now())


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "rate(0 minutes)"}, "cron"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"task": "nope"}, "task"),
        ({"misfire_policy": "sometimes"}, "misfire_policy"),
        ({"overlap_policy": "both"}, "overlap_policy"),
        ({"start_at": "yesterday"}, "start_at"),
        ({"start_at": "2026-02-01T00:00:00Z", "end_at": "2026-01-01T00:00:00Z"}, "end_at"),
        ({"jitter_seconds": -1}, "jitter_seconds"),
        ({"max_runs": 0}, "max_runs"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_invalid_schedules_are_refused_naming_the_field(
    offline_app: Leasehold, body: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        make(offline_app, **body)
    assert raised.value.field == field


def test_a_valid_body_keeps_every_field(offline_app: Leasehold) -> None:
    schedule = make(offline_app, name="nightly", cron="30 2 * * *", timezone="Europe/London",
                    payload={"a": 1}, priority="high", misfire_policy="catch_up",
                    overlap_policy="forbid", start_at="2026-02-01T00:00:00Z",
                    end_at=1_800_000_000_000, max_runs=5, jitter_seconds=30, max_catch_up=2,
                    starting_deadline_seconds=60)
    view = schedule.view()
    assert {k: view[k] for k in ("name", "cron", "timezone", "payload", "priority",
                                 "misfire_policy", "overlap_policy", "start_at", "max_runs",
                                 "jitter_seconds", "max_catch_up",
                                 "starting_deadline_seconds")} == {
        "name": "nightly", "cron": "30 2 * * *", "timezone": "Europe/London",
        "payload": {"a": 1}, "priority": "high", "misfire_policy": "catch_up",
        "overlap_policy": "forbid", "start_at": "2026-02-01T00:00:00.000Z", "max_runs": 5,
        "jitter_seconds": 30.0, "max_catch_up": 2, "starting_deadline_seconds": 60.0}
    assert view["end_at"] == "2027-01-15T08:00:00.000Z"


def test_an_update_keeps_what_it_does_not_name(offline_app: Leasehold) -> None:
    base = make(offline_app, payload={"a": 1}, timezone="Asia/Tokyo")
    changed = build(offline_app, {"cron": "@hourly"}, tenant="acme", now=offline_app.now(),
                    base=base)
    assert (changed.cron, changed.timezone, changed.template) == (
        "@hourly", "Asia/Tokyo", base.template)


def test_a_time_out_of_range_is_refused_in_dates(offline_app: Leasehold) -> None:
    with pytest.raises(ValidationError) as raised:
        make(offline_app, end_at=10**15)
    assert raised.value.field == "end_at"
    assert "9999-12-31T23:59:59Z" in str(raised.value) and "e+" not in str(raised.value)
