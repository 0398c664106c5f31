"""The sweeper loop backs off while idle, and still recovers an expired lease in time."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold

from .helpers import receive_all, submit_swept, timed_calls


@pytest.fixture
def sweeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    return timed_calls(monkeypatch, sweeper, "sweep")


def _leased_by_a_dead_worker(app: Leasehold, registry: TaskRegistry) -> str:
    registry.task("echo")(lambda payload, ctx: payload)
    job = submit_swept(app, JobSpec(task="echo", payload="p")).job  # the sweeper's to recover
    [message] = receive_all(app)
    app.store.lease(job.job_id, json.loads(message.body)["epoch"], owner="dead:1",
                    now=app.now(), expires_at=app.now() + 30_000, actor="dead")
    return job.job_id


def _loop(app: Leasehold, **kwargs: Any) -> tuple[threading.Thread, threading.Event]:
    stop = threading.Event()
    thread = threading.Thread(target=sweeper.run, args=(app, stop), daemon=True,
                              kwargs={"interval_seconds": 0.05, **kwargs})
    thread.start()
    return thread, stop


def test_a_backed_off_sweeper_recovers_an_expired_lease_within_its_cap(
        app: Leasehold, registry: TaskRegistry, clock: FakeClock, sweeps: list[float]) -> None:
    job_id = _leased_by_a_dead_worker(app, registry)
    thread, stop = _loop(app, idle_interval_seconds=0.8)
    try:
        deadline = time.monotonic() + 10
        while len(sweeps) < 6:  # waits 0.1, 0.2, 0.4, 0.8, 0.8: backed off to its cap
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert app.store.get(job_id).state is JobState.RUNNING  # not expired yet
        clock.advance(30 + app.settings.skew_grace_seconds + 1)  # the lease expires now
        expired = time.monotonic()
        while app.store.get(job_id).state is JobState.RUNNING:
            assert time.monotonic() - expired < 5, "the sweeper never recovered the lease"
            time.sleep(0.02)
        # Within the cap, with slack for a loaded machine: uncapped, the next wait would
        # already be 3.2 s (0.1 doubled five times).
        assert time.monotonic() - expired < 0.8 + 2.0
    finally:
        stop.set()
        thread.join(5)
    # Read once the sweeper has stopped: in-process moto applies an update field by field,
    # so a read racing the sweeper's thread may see the new state before its crash count.
    recovered = app.store.get(job_id)
    assert (recovered.state, recovered.crash_count) == (JobState.QUEUED, 1)


def test_a_wake_brings_a_backed_off_sweeper_back_at_once(
        app: Leasehold, sweeps: list[float]) -> None:
    wake = threading.Event()
    thread, stop = _loop(app, idle_interval_seconds=30, wake=wake)
    try:
        deadline = time.monotonic() + 10
        while len(sweeps) < 5:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.2)
        before = len(sweeps)
        woken = time.monotonic()
        wake.set()
        while len(sweeps) == before:
            assert time.monotonic() - woken < 1.0, "the woken sweeper did not sweep"
            time.sleep(0.01)
        time.sleep(0.3)
        assert len(sweeps) >= before + 2  # and back at its base pace (then doubling again)
    finally:
        stop.set()
        wake.set()
        thread.join(5)
    assert not thread.is_alive()


def test_an_idle_sweeper_runs_the_repairs_once_a_minute_and_every_pass_that_finds_work(
        app: Leasehold, monkeypatch: pytest.MonkeyPatch, sweeps: list[float]) -> None:
    # Idle passes repair at most every REPAIR_SECONDS (as the stack's sweeper, every two
    # minutes); a pass that found work is followed by one that repairs at once. Counted in
    # passes, not in wall time, so a loaded machine's slow passes change nothing.
    monkeypatch.setattr(sweeper, "REPAIR_SECONDS", 0.5)
    repairs: list[float] = []
    app.repairs["counted"] = lambda app, now: repairs.append(time.monotonic()) or 0
    started = time.monotonic()
    thread, stop = _loop(app)  # base 0.05 s, never backing off: many idle passes
    try:
        _wait_for(lambda: len(sweeps) >= 12)
        elapsed = time.monotonic() - started
        idle_passes, idle_repairs = len(sweeps), len(repairs)
        # The first pass repairs, then one per 0.5 s at most, whatever the passes' pace.
        assert 1 <= idle_repairs <= 2 + int(elapsed / 0.5), (idle_passes, idle_repairs,
                                                              elapsed)
        app.repairs["found"] = lambda app, now: 1  # the next repairing pass finds work ...
        _wait_for(lambda: len(repairs) > idle_repairs)
        switched_passes, switched_repairs = len(sweeps), len(repairs)
        _wait_for(lambda: len(sweeps) - switched_passes >= 8)
        # ... so from then on every pass repairs.
        passes = len(sweeps) - switched_passes
        assert len(repairs) - switched_repairs >= passes - 1, (passes, len(repairs),
                                                               switched_repairs)
    finally:
        stop.set()
        thread.join(5)


def _wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the sweeper loop made no progress"
        time.sleep(0.02)
