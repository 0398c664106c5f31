"""Event patterns: the EventBridge syntax subset, table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.errors import ValidationError
from leasehold.events.triggers import extract, matches, validate_pattern

EVENT = {
    "source": "shop.orders", "detail-type": "Order Placed",
    "detail": {"order": "A-17", "total": 120.5, "items": ["book", "pen"], "region": "eu-west-1",
               "file": "report.PNG", "coupon": None, "express": True},
}


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ({"source": ["shop.orders"]}, True),
        ({"source": ["shop.returns"]}, False),
        ({"source": ["shop.returns", "shop.orders"]}, True),
        ({"detail": {"items": ["pen"]}}, True),  # any element of an array
        ({"detail": {"total": [120.5]}}, True),
        ({"detail": {"express": [True]}}, True),
        ({"detail": {"express": ["true"]}}, False),
        ({"detail": {"coupon": [None]}}, True),
        ({"detail": {"missing": [None]}}, False),
        ({"source": [{"prefix": "shop."}]}, True),
        ({"detail": {"file": [{"suffix": ".png"}]}}, False),
        ({"detail": {"file": [{"suffix": {"equals-ignore-case": ".png"}}]}}, True),
        ({"detail-type": [{"equals-ignore-case": "order placed"}]}, True),
        ({"detail": {"region": [{"wildcard": "eu-*-1"}]}}, True),
        ({"detail": {"region": [{"wildcard": "us-*"}]}}, False),
        ({"detail": {"region": [{"anything-but": "us-east-1"}]}}, True),
        ({"detail": {"region": [{"anything-but": ["eu-west-1", "x"]}]}}, False),
        ({"detail": {"region": [{"anything-but": {"prefix": "us-"}}]}}, True),
        ({"detail": {"total": [{"numeric": [">", 100, "<=", 200]}]}}, True),
        ({"detail": {"total": [{"numeric": ["<", 100]}]}}, False),
        ({"detail": {"order": [{"numeric": [">", 0]}]}}, False),
        ({"detail": {"order": [{"exists": True}]}}, True),
        ({"detail": {"refund": [{"exists": False}]}}, True),
        ({"detail": {"order": [{"exists": False}]}}, False),
        ({"source": ["shop.orders"], "detail": {"order": ["B-1"]}}, False),  # and
        ({"$or": [{"source": ["x"]}, {"detail": {"order": ["A-17"]}}]}, True),
        ({"$or": [{"source": ["x"]}, {"detail": {"order": ["B"]}}]}, False),
    ],
)
def test_patterns_match_as_eventbridge_does(pattern: dict[str, Any], expected: bool) -> None:
    validate_pattern(pattern)
    assert matches(pattern, EVENT) is expected


@pytest.mark.parametrize(
    "pattern",
    [{}, [], {"source": "shop"}, {"source": []}, {"source": [{"regex": "x"}]},
     {"a": [{"numeric": [">", "1"]}]}, {"a": [{"numeric": ["~", 1]}]}, {"a": [{"exists": 1}]},
     {"$or": [{"a": [1]}]}, {"a": [{"prefix": 1}]}, {"a": [{"prefix": "x", "suffix": "y"}]}],
)
def test_invalid_patterns_are_refused_naming_the_field(pattern: Any) -> None:
    with pytest.raises(ValidationError) as raised:
        validate_pattern(pattern)
    assert raised.value.field == "pattern"


def test_input_paths_pick_a_part_of_the_event() -> None:
    assert extract(EVENT, "$") is EVENT
    assert extract(EVENT, "$.detail.order") == "A-17"
    assert extract(EVENT, "$.detail.nope.deeper") is None
