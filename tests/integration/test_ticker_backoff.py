"""The ticker loop backs off while idle, yet fires new work at once and keeps its lease."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold
from leasehold.time import schedules, ticker
from leasehold.time.leader import LeaderLease

from .helpers import timed_calls


@pytest.fixture
def ticks(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When each tick ran (wall time): the real tick, counted."""
    return timed_calls(monkeypatch, ticker, "tick")


@pytest.fixture
def wall_clock(clock: FakeClock) -> Iterator[FakeClock]:
    """The app's clock follows the wall clock (leases expire in real time)."""
    stop = threading.Event()
    start = time.monotonic()
    base = clock.now_ms()

    def follow() -> None:
        while not stop.wait(0.02):
            clock.set(base + int((time.monotonic() - start) * 1000))

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    yield clock
    stop.set()
    thread.join()


def _loop(app: Leasehold, **kwargs: Any) -> tuple[threading.Thread, threading.Event]:
    stop = threading.Event()
    thread = threading.Thread(target=ticker.run, args=(app, stop), daemon=True,
                              kwargs={"interval_seconds": 0.05, "idle_interval_seconds": 30,
                                      **kwargs})
    thread.start()
    return thread, stop


def _backed_off(ticks: list[float]) -> None:
    deadline = time.monotonic() + 10
    while len(ticks) < 5:  # 0.05, 0.1, 0.2, 0.4, 0.8 s: the next wait is 1.6 s or more
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_an_idle_ticker_backs_off(app: Leasehold, ticks: list[float]) -> None:
    thread, stop = _loop(app)
    try:
        time.sleep(3)
        # Base pace would be 60 ticks; doubling from 0.05 s gives 6 (0, .1, .3, .7, 1.5, 3.1).
        assert 3 <= len(ticks) <= 7
        assert ticks[-1] - ticks[-2] >= 0.7  # waits grew to seconds
    finally:
        stop.set()
        thread.join(5)


def test_a_schedule_created_while_backed_off_fires_at_once_when_woken(
        app: Leasehold, registry: TaskRegistry, ticks: list[float]) -> None:
    registry.task("report")(lambda payload, ctx: None)
    wake = threading.Event()
    thread, stop = _loop(app, wake=wake)
    try:
        _backed_off(ticks)
        time.sleep(0.5)
        # Due within the look-ahead (the next minute): the next tick hands it off.
        schedule = schedules.create(app, {"task": "report", "cron": "* * * * *"}, tenant="t")
        woken = time.monotonic()
        wake.set()  # what the local API does when it accepts a write
        deadline = woken + 5
        while schedules.get(app, schedule.schedule_id).run_count == 0:
            assert time.monotonic() < deadline, "the woken ticker did not fire the schedule"
            time.sleep(0.02)
        assert time.monotonic() - woken < 1.0
        assert schedules.get(app, schedule.schedule_id).last_job_id is not None
    finally:
        stop.set()
        wake.set()
        thread.join(5)


def test_a_backed_off_leader_keeps_its_lease(app: Leasehold, wall_clock: FakeClock,
                                             ticks: list[float]) -> None:
    mine = LeaderLease(app, "ticker", owner="mine", lease_seconds=0.9)
    other = LeaderLease(app, "ticker", owner="other", lease_seconds=0.9)
    thread, stop = _loop(app, lease=mine)
    try:
        _backed_off(ticks)
        before = len(ticks)
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            assert not other.acquire(), "the leader let its lease lapse while backed off"
            time.sleep(0.1)
        assert len(ticks) - before <= 3  # it renewed far more often than it ticked
    finally:
        stop.set()
        thread.join(5)
    assert other.acquire()  # released on stop
