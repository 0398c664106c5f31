"""Key templates of a trigger that takes each event's payload follow one rule (issue 45):
``concurrency`` and ``throttle`` keys on an event field are accepted as ``unique`` and
``debounce`` keys are, and rendered over each event's payload."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.core.flowcontrol import GATE, UNIQUE_KEY
from leasehold.core.registry import TaskRegistry
from leasehold.errors import ValidationError
from leasehold.events import triggers
from leasehold.lifecycle.app import Leasehold

KEYED = {
    "concurrency": {"key": "c:{payload.account}", "limit": 1},
    "throttle": {"key": "t:{payload.account}", "limit": 5, "period_seconds": 60},
    "unique": {"key": "u:{payload.account}"},
}


@pytest.fixture
def ship(registry: TaskRegistry) -> str:
    registry.task("ship")(lambda payload, ctx: payload)
    return "ship"


def make(app: Leasehold, ship: str, **options: Any) -> triggers.Trigger:
    return triggers.create(app, {"task": ship, "input_path": "$.detail",
                                 "pattern": {"source": ["shop"]}, **options}, tenant="acme")


def test_keys_on_an_event_field_are_accepted_and_rendered_per_event(
    app: Leasehold, ship: str
) -> None:
    make(app, ship, **KEYED)
    [job] = triggers.dispatch(app, {"id": "e1", "source": "shop", "detail": {"account": 7}},
                              tenant="acme")
    assert job.extra[GATE]["concurrency"]["key"] == "c:7"
    assert job.extra[GATE]["throttle"]["key"] == "t:7"
    assert job.extra[UNIQUE_KEY] == "u:7"
    [other] = triggers.dispatch(app, {"id": "e2", "source": "shop", "detail": {"account": 8}},
                                tenant="acme")
    assert other.extra[GATE]["concurrency"]["key"] == "c:8"
    # An event without the field makes no job, whichever option names it.
    assert triggers.dispatch(app, {"id": "e3", "source": "shop", "detail": {}},
                             tenant="acme") == []


@pytest.mark.parametrize("name", sorted(KEYED))
def test_each_option_alone_on_an_event_field_is_one_rule(
    app: Leasehold, ship: str, name: str
) -> None:
    make(app, ship, **{name: KEYED[name]})
    assert triggers.dispatch(app, {"id": "e1", "source": "shop", "detail": {}},
                             tenant="acme") == []
    [job] = triggers.dispatch(app, {"id": "e2", "source": "shop",
                                    "detail": {"account": "a"}}, tenant="acme")
    assert job.payload == {"account": "a"}


@pytest.mark.parametrize("name", sorted(KEYED))
@pytest.mark.parametrize("key", ["x:{account}", "k" * 201, "k" * 257])
def test_a_key_no_event_could_fill_is_refused_alike(
    app: Leasehold, ship: str, name: str, key: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        make(app, ship, **{name: {**KEYED[name], "key": key}})
    assert refused.value.field == f"{name}.key"
