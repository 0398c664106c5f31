"""Flow control: what each option costs per job, how fast a parked job wakes, throttle accuracy.

Runs on a private emulator through the real code paths (submission, the worker as Lambda's
event source drives it), metered like :mod:`bench.per_job`:

* requests per job without options, with a concurrency key (no job waits: the floor of the
  option's cost) and with a throttle under its rate (the metering does not model a
  transaction's write units, so compare requests);
* the wake-up latency of a parked job: from the write that freed its slot (the previous
  holder's end) to its own lease, p50/p99, on a key of limit 1;

Throttle accuracy is held by tests/integration/test_flow_throttle_pause.py (every window of
starts within ``burst + W / T``) rather than timed here.

``python -m bench.flow`` prints the figures as JSON.
"""

from __future__ import annotations

import json
import statistics
import uuid
from typing import Any

from bench.local import fake_credentials, library_app
from bench.per_job import Bench
from leasehold.aws import provision
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.store import Change
from leasehold.lifecycle.submission import submit
from leasehold.local import emulator

BATCH = 10


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure_all(*, batch: int = BATCH, wakes: int = 40) -> dict[str, Any]:
    fake_credentials()
    server = emulator.start()
    try:
        app = library_app(server.endpoint)
        provision.create_all(app.clients, app.settings)
        bench = Bench(app)
        results: dict[str, Any] = {}

        def run(**options: Any) -> None:
            tenant = "f" + uuid.uuid4().hex[:8]
            for i in range(batch):
                submit(app, JobSpec(task="bench.noop", tenant=tenant, payload={"i": i},
                                    **options))
            bench.run(batch)

        run()  # warm up
        for name, options in {
            "without_options": {},
            "concurrency_uncontended": {"concurrency": {"key": "k", "limit": 1000}},
            "throttle_under_rate": {"throttle": {"key": "t", "limit": 10_000,
                                                 "period_seconds": 1}},
        }.items():
            usage = bench.measure(lambda options=options: run(**options)).per(batch)
            results[name] = {k: usage[k] for k in (
                "requests", "dynamodb_requests", "sqs_requests", "write_units", "read_units",
                "requests_by_operation")}

        # Wake-up latency on a key of limit 1: a holder keeps the slot while a second job
        # arrives and parks; the holder's end (the write that frees the slot) wakes it. The
        # latency is from that write's commit to the parked job's lease, through the queue.
        bench.meter.enabled = False
        tenant = "w" + uuid.uuid4().hex[:8]
        keyed = {"concurrency": {"key": "w", "limit": 1}}
        latencies = []
        for _ in range(wakes):
            holder = submit(app, JobSpec(task="bench.noop", tenant=tenant, **keyed)).job
            [message] = bench.poller.receive(bench.url, max_messages=1, wait_seconds=5)
            bench.poller.delete(bench.url, [message.receipt_handle])
            now = app.now()
            held = app.store.lease(holder.job_id, holder.epoch, owner="bench", now=now,
                                   expires_at=now + 30_000, actor="bench",
                                   gate=holder.extra["lease_gate"])
            waiter = submit(app, JobSpec(task="bench.noop", tenant=tenant, **keyed)).job
            bench.run(1)  # it parks
            freed = app.now()
            app.store.transition(held, Change(target=JobState.SUCCEEDED, actor="bench",
                                              owner="bench"), now=freed)
            bench.run(1)  # woken: leased and run
            started = app.store.get(waiter.job_id).started_at
            assert started is not None
            latencies.append((started - freed) / 1000)
        results["wake_up_seconds"] = {
            "jobs": len(latencies), "p50": round(statistics.median(latencies), 3),
            "p99": round(_percentile(latencies, 0.99), 3), "max": round(max(latencies), 3)}
        return results
    finally:
        server.stop()


if __name__ == "__main__":
    print(json.dumps(measure_all(), indent=1))
