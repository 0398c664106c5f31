"""The weighted priority poll: high first most often, low never starved."""

from __future__ import annotations

from collections import Counter

import pytest

from leasehold.polling.priorities import PriorityPicker


def test_each_priority_goes_first_at_its_weighted_share() -> None:
    picker = PriorityPicker({"high": 6, "normal": 3, "low": 1})
    firsts = Counter(picker.order()[0] for _ in range(1000))
    assert firsts == {"high": 600, "normal": 300, "low": 100}


def test_low_goes_first_within_every_window_of_ten_polls() -> None:
    picker = PriorityPicker({"high": 6, "normal": 3, "low": 1})
    firsts = [picker.order()[0] for _ in range(200)]
    for start in range(0, 190):
        assert "low" in firsts[start:start + 10]


def test_the_rest_follow_in_priority_order() -> None:
    picker = PriorityPicker({"high": 1, "normal": 1, "low": 1})
    orders = [picker.order() for _ in range(3)]
    assert sorted(o[0] for o in orders) == ["high", "low", "normal"]
    for order in orders:
        rest = [p for p in ("high", "normal", "low") if p != order[0]]
        assert order[1:] == rest


def test_a_zero_weight_is_refused_because_it_would_starve() -> None:
    with pytest.raises(ValueError, match="starve"):
        PriorityPicker({"high": 1, "normal": 1, "low": 0})
