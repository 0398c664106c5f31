"""The one clock. Everything measures time as UTC epoch milliseconds.

Domain code takes ``now`` (or a :class:`Clock`) as an argument; only the edges read the
system clock, so tests can move time at will.
"""

from __future__ import annotations

import threading
import time
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
