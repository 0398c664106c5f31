"""Which records a reset from a step drops, and in which order (``durable/reset.py``)."""

from __future__ import annotations

from leasehold.durable.reset import dropped


def test_a_reset_drops_the_step_and_every_later_record_newest_first_by_place() -> None:
    stored = {  # places written by the runner (``seq``); times that tie or run backwards
        "step#reserve": {"sk": "step#reserve", "seq": 0, "at": 5},
        "cb#approve": {"sk": "cb#approve", "seq": 1, "at": 5},
        "step#charge": {"sk": "step#charge", "seq": 2, "at": 5},
        "sleep#1": {"sk": "sleep#1", "seq": 3, "at": 4},
        "child#child.1": {"sk": "child#child.1", "seq": 4, "at": 9},
    }
    assert [r["sk"] for r in dropped(stored, "charge")] == \
        ["child#child.1", "sleep#1", "step#charge"]
    assert [r["sk"] for r in dropped(stored, "reserve")][-1] == "step#reserve"
    assert len(dropped(stored, "reserve")) == 5


def test_records_from_before_places_sort_by_time_and_before_placed_ones() -> None:
    stored = {
        "step#a": {"sk": "step#a", "at": 1},
        "step#b": {"sk": "step#b", "at": 2},
        "step#c": {"sk": "step#c", "seq": 0, "at": 0},  # written after an upgrade
    }
    assert [r["sk"] for r in dropped(stored, "b")] == ["step#c", "step#b"]
    assert [r["sk"] for r in dropped(stored, "c")] == ["step#c"]
