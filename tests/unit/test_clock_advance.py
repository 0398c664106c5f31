"""``leasehold.advance`` moves only a test's in-process scheduler; anywhere else it refuses."""

from __future__ import annotations

import pytest

import leasehold
from leasehold import clock


def test_advance_without_a_test_runtime_says_there_is_none() -> None:
    with pytest.raises(RuntimeError, match="none is running"):
        leasehold.advance(1)


def test_advance_moves_the_registered_test_clock_until_it_is_removed() -> None:
    moved: list[float] = []
    clock.use_test_clock(lambda seconds: moved.append(seconds) or 42)
    try:
        assert leasehold.advance(3600) == 42 and moved == [3600]
    finally:
        clock.use_test_clock(None)
    with pytest.raises(RuntimeError):
        leasehold.advance(1)
