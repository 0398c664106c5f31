"""The order the emulator's fair queues hand messages out in (pure)."""

from __future__ import annotations

from leasehold.polling.fairness import fair_order


def group(message: str) -> str | None:
    return None if message.startswith("-") else message[0]


def test_the_group_with_fewest_in_flight_goes_first() -> None:
    messages = ["a1", "a2", "a3", "b1"]
    assert fair_order(messages, group, {"a": 5}) == ["b1", "a1", "a2", "a3"]


def test_equal_groups_alternate_oldest_first() -> None:
    messages = ["a1", "a2", "b1", "b2", "c1"]
    assert fair_order(messages, group, {}) == ["a1", "b1", "c1", "a2", "b2"]


def test_ungrouped_messages_keep_their_order_and_count_as_quiet_tenants() -> None:
    assert fair_order(["-1", "-2", "-3"], group, {}) == ["-1", "-2", "-3"]
    assert fair_order(["a1", "a2", "-1"], group, {"a": 3}) == ["-1", "a1", "a2"]


def test_in_flight_of_groups_with_nothing_waiting_is_ignored() -> None:
    assert fair_order(["a1", "b1"], group, {"c": 100, "b": 1}) == ["a1", "b1"]
