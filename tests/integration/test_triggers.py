"""Triggers: a matching event submits a job once, however often it is delivered."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.errors import NotFound, ValidationError
from leasehold.events import triggers
from leasehold.lifecycle.app import Leasehold


@pytest.fixture
def ship(registry: TaskRegistry) -> str:
    registry.task("ship")(lambda payload, ctx: payload)
    return "ship"


def test_a_matching_event_submits_the_template_once_per_event(app: Leasehold, ship: str) -> None:
    trigger = triggers.create(app, {"name": "orders", "task": ship, "input_path": "$.detail",
                                    "pattern": {"source": ["shop"],
                                                "detail": {"total": [{"numeric": [">", 100]}]}}},
                              tenant="acme")
    event: dict[str, Any] = {"id": "e-1", "source": "shop", "detail": {"total": 150}}
    jobs = triggers.dispatch(app, event, tenant="acme")
    assert [(j.task, j.payload, j.state) for j in jobs] == [(ship, {"total": 150},
                                                              JobState.QUEUED)]
    assert jobs[0].extra["trigger_id"] == trigger.trigger_id
    # Redelivery of the same event (EventBridge is at-least-once) finds the same job.
    assert [j.job_id for j in triggers.dispatch(app, event, tenant="acme")] == [jobs[0].job_id]
    assert triggers.dispatch(app, {"source": "shop", "detail": {"total": 5}}, tenant="acme") == []
    # Another tenant's events never fire acme's triggers.
    assert triggers.dispatch(app, {"source": "shop", "detail": {"total": 500}},
                             tenant="other") == []


def test_a_template_payload_wins_over_the_event(app: Leasehold, ship: str) -> None:
    triggers.create(app, {"task": ship, "payload": {"fixed": 1}, "pattern": {"a": [1]}},
                    tenant="acme")
    assert [j.payload for j in triggers.dispatch(app, {"a": 1}, tenant="acme")] == [{"fixed": 1}]


def test_triggers_are_listed_deleted_and_validated(app: Leasehold, ship: str) -> None:
    trigger = triggers.create(app, {"task": ship, "pattern": {"a": [1]}}, tenant="acme")
    assert [t.trigger_id for t in triggers.list_triggers(app, "acme")] == [trigger.trigger_id]
    with pytest.raises(NotFound):
        triggers.delete(app, trigger.trigger_id, "other")
    triggers.delete(app, trigger.trigger_id, "acme")
    assert triggers.list_triggers(app, "acme") == []
    with pytest.raises(ValidationError) as raised:
        triggers.create(app, {"task": ship, "pattern": {"a": "1"}}, tenant="acme")
    assert raised.value.field == "pattern"
