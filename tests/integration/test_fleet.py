"""The worker registry: live workers are listed; a silent one drops off whatever its TTL says."""

from __future__ import annotations

from leasehold.clock import FakeClock
from leasehold.lifecycle import fleet
from leasehold.lifecycle.app import Leasehold


def test_a_worker_that_stops_heartbeating_drops_off_the_list(app: Leasehold,
                                                             clock: FakeClock) -> None:
    quiet = fleet.WorkerInfo(worker_id="w-quiet", pool="default", heartbeat_seconds=2)
    busy = fleet.WorkerInfo(worker_id="w-busy", pool="default", heartbeat_seconds=2)
    fleet.heartbeat(app, quiet)
    fleet.heartbeat(app, busy, current_jobs=["J1"], processed=3)
    assert [w.worker_id for w in fleet.live_workers(app)] == ["w-busy", "w-quiet"]
    clock.advance(5)
    fleet.heartbeat(app, busy, current_jobs=["J2"], processed=4)
    clock.advance(2)
    # w-quiet's item is still in the table (its TTL is far away) but 7 s > 3 heartbeats.
    live = fleet.live_workers(app)
    assert [(w.worker_id, w.current_jobs, w.processed) for w in live] == \
        [("w-busy", ("J2",), 4)]
    assert fleet.live_workers(app, pool="gpu") == []


def test_a_worker_that_stops_cleanly_deregisters(app: Leasehold) -> None:
    info = fleet.WorkerInfo(worker_id="w-1", pool="default")
    fleet.heartbeat(app, info)
    fleet.deregister(app, "w-1")
    assert fleet.live_workers(app) == []
