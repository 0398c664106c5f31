"""``leasehold schedules next`` prints each time in the schedule's zone (not the machine's)
and how soon it is due in words (issue 25)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from leasehold.api.schedules import in_zone
from leasehold.cli.schedules import _times, due_in


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "now"), (-5, "now"), (45, "in 45 s"), (61, "in 1 min 1 s"), (3600, "in 1 h"),
    (4 * 3600 + 12 * 60 + 9, "in 4 h 12 min"), (3 * 86400 + 2 * 3600 + 59, "in 3 d 2 h"),
    (86400 + 30, "in 1 d"),
])
def test_due_in_reads_in_the_two_largest_units(seconds: float, text: str) -> None:
    assert due_in(seconds) == text


def test_next_prints_tokyo_nine_oclock_as_nine_in_tokyo() -> None:
    at = int(datetime(2026, 1, 2, 0, 0, tzinfo=UTC).timestamp() * 1000)
    local = in_zone(at, "Asia/Tokyo")
    assert local == "2026-01-02T09:00:00+09:00"
    reply = {"times": ["2026-01-02T00:00:00.000Z"], "timezone": "Asia/Tokyo",
             "local_times": [local]}
    text = _times(reply, now=datetime(2026, 1, 1, 19, 48, tzinfo=UTC))
    header, row = text.splitlines()[:2]
    assert "ASIA/TOKYO" in header and "LOCAL" not in header
    assert "2026-01-02T09:00:00+09:00" in row and "in 4 h 12 min" in row
