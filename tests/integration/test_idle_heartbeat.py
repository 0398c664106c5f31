"""An idle worker heartbeats the registry less often, and says so: the fleet view stays right."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from leasehold.clock import FakeClock
from leasehold.lifecycle import fleet
from leasehold.lifecycle.app import Leasehold
from leasehold.polling.poller import PollerOptions, PollingWorker


def _worker(app: Leasehold) -> PollingWorker:
    named: Any = SimpleNamespace(worker_id="w-1", running=set())
    return PollingWorker(app, PollerOptions(heartbeat_seconds=2, idle_heartbeat_seconds=10),
                         worker=named)


def test_an_unchanged_idle_worker_promises_its_next_beat_later_and_stays_listed(
        app: Leasehold, clock: FakeClock) -> None:
    worker = _worker(app)
    worker.beat()  # the first beat: at the busy pace
    assert [w.heartbeat_seconds for w in fleet.live_workers(app)] == [2]
    worker.beat()  # nothing changed: the idle pace, said in the item
    assert [w.heartbeat_seconds for w in fleet.live_workers(app)] == [10]
    assert not worker.beat_due()  # and not due again before it
    clock.advance(29)
    assert [w.worker_id for w in fleet.live_workers(app)] == ["w-1"]
    clock.advance(2)  # three idle beats missed: it is gone
    assert fleet.live_workers(app) == []


def test_a_change_beats_at_once_at_the_busy_pace(app: Leasehold, clock: FakeClock) -> None:
    worker = _worker(app)
    worker.beat()
    worker.beat()
    assert not worker.beat_due()
    worker._current[1] = ["job-1"]  # a batch started
    worker.worker.running.add("job-1")  # and its first job
    assert worker.beat_due()
    worker.beat()
    [listed] = fleet.live_workers(app)
    assert (listed.current_jobs, listed.heartbeat_seconds) == (("job-1",), 2)
    clock.advance(7)  # a busy worker that stopped beating drops off after 3 busy beats
    assert fleet.live_workers(app) == []
