"""A background loop's pace: base while it finds work, doubling to a cap while it does not."""

from __future__ import annotations

import pytest

from leasehold.core.pacing import IdlePacing


def test_empty_passes_double_the_wait_up_to_the_cap_and_work_resets_it() -> None:
    pace = IdlePacing(1.0, 30.0)
    assert [pace.after(False) for _ in range(6)] == [2, 4, 8, 16, 30, 30]
    assert pace.backed_off
    assert pace.after(True) == 1.0
    assert not pace.backed_off


def test_a_wake_returns_to_the_base_pace() -> None:
    pace = IdlePacing(2.0, 16.0)
    for _ in range(5):
        pace.after(False)
    pace.wake()
    assert pace.current == 2.0
    assert pace.after(False) == 4.0


def test_a_cap_below_the_base_means_no_back_off() -> None:
    pace = IdlePacing(2.0, 0.5)
    assert pace.after(False) == 2.0
    with pytest.raises(ValueError):
        IdlePacing(0, 1)
