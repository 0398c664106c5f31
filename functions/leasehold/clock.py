"""The one clock. Everything measures time as UTC epoch milliseconds.

Domain code takes ``now`` (or a :class:`Clock`) as an argument; only the edges read the
system clock, so tests can move time at will.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...
    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class FakeClock:
    """A clock that only moves when told to (thread-safe)."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:  # 2026-01-01T00:00:00Z
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        """Waiting on a fake clock moves it: no test ever really sleeps."""
        self.advance(max(0.0, seconds))

    def advance(self, seconds: float) -> int:
        with self._lock:
            self._now += int(seconds * 1000)
            return self._now

    def set(self, ms: int) -> None:
        with self._lock:
            self._now = ms


#: What :func:`advance` moves: the ``advance`` of the in-process runtime a test runs
#: (``leasehold.testing`` registers it for the length of the test). Empty anywhere else.
_test_clocks: list[Callable[[float], int]] = []


def advance(seconds: float) -> int:
    """Move the test clock of the in-process scheduler (the ``leasehold`` pytest fixture)
    ``seconds`` ahead: delayed jobs, schedules, durable sleeps, callback timeouts and retry
    back-offs that fall due meanwhile run, in time order. Returns the clock's new time
    (epoch ms). Outside such a test it raises ``RuntimeError``: a real clock never jumps."""
    if not _test_clocks:
        raise RuntimeError("leasehold.advance() moves the clock of the in-process scheduler "
                           "of a test (the `leasehold` pytest fixture of "
                           "leasehold.testing.fixtures); none is running")
    return _test_clocks[-1](seconds)


def use_test_clock(advance_by: Callable[[float], int] | None) -> None:
    """Make :func:`advance` call ``advance_by`` (None: no test clock any more)."""
    _test_clocks[:] = [] if advance_by is None else [advance_by]


def to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def to_ms(value: datetime) -> int:
    if value.tzinfo is None:
        raise ValueError("naive datetime: times must carry a time zone")
    return int(value.timestamp() * 1000)


def iso(ms: int | None) -> str | None:
    """ISO-8601 UTC with milliseconds, or None."""
    if ms is None:
        return None
    return to_datetime(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")
