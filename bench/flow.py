"""Flow control: what each option costs per job, how fast a parked job wakes, throttle accuracy.

Runs on a private emulator through the real code paths (submission, the worker as Lambda's
event source drives it), metered like :mod:`bench.per_job`:

* requests and write units per job without options and with each option (:data:`OPTIONS`): a
  concurrency key no job waits on (the floor of the option's cost), a throttle under its
  rate, a unique key, a start window, a debounce window of one submission and one that many
  submissions coalesce into;
* the wake-up latency of a parked job: from the write that freed its slot (the previous
  holder's end) to its own lease, p50/p99, on a key of limit 1;
* throttle accuracy (:func:`throttle_accuracy`): a burst of jobs on one throttled key through
  ``leasehold dev`` on the real clock, its starts counted per window against the limit.

``python -m bench.flow`` prints the figures as JSON.
"""

from __future__ import annotations

import json
import statistics
import uuid
from collections.abc import Callable
from typing import Any

from bench.local import fake_credentials, library_app, runtime, wait_succeeded
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


#: Each option as a submission takes it (by the submission's number in its batch); per job.
OPTIONS: dict[str, Callable[[int], dict[str, Any]]] = {
    "without_options": lambda i: {},
    "concurrency_uncontended": lambda i: {"concurrency": {"key": "k", "limit": 1000}},
    "throttle_under_rate": lambda i: {"throttle": {"key": "t", "limit": 10_000,
                                                   "period_seconds": 1}},
    "unique": lambda i: {"unique": {"key": f"u{i}"}},
    "start_within": lambda i: {"start_within_seconds": 60},
    # A window of one submission: the job's own cost.
    "debounce_one_submission": lambda i: {"debounce": {"key": f"d{i}", "seconds": 1}},
    # Every submission coalesced into one window, per submission: each pushes the window
    # out (a new epoch and a hand-off; the older message arrives and is refused).
    "debounce_per_coalesced_submission": lambda i: {"debounce": {"key": "one",
                                                                  "seconds": 1}},
}


def measure_all(*, batch: int = BATCH, wakes: int = 40) -> dict[str, Any]:
    fake_credentials()
    server = emulator.start()
    try:
        app = library_app(server.endpoint)
        provision.create_all(app.clients, app.settings)
        bench = Bench(app)
        results: dict[str, Any] = {}

        def run(options: Callable[[int], dict[str, Any]]) -> None:
            tenant = "f" + uuid.uuid4().hex[:8]
            for i in range(batch):
                submit(app, JobSpec(task="bench.noop", tenant=tenant, payload={"i": i},
                                    **options(i)))
            bench.run(batch)

        run(lambda i: {})  # warm up
        for name, options in OPTIONS.items():
            usage = bench.measure(lambda options=options: run(options)).per(batch)
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


def throttle_accuracy(*, jobs: int = 60, limit: int = 10, period_seconds: float = 1.0,
                      workers: int = 2) -> dict[str, Any]:
    """Submit ``jobs`` at once on one key throttled to ``limit`` per ``period_seconds`` (burst
    = limit) and time their starts through ``leasehold dev`` (workers, ticker, queues).

    GCRA admits at most ``burst + W / T`` starts in any window of W seconds (T = period /
    limit): ``over_bound`` counts the pairs of starts that break it (the guarantee: 0). Each
    job's ideal start is the GCRA slot it got, counted from the first start: ``behind_slot``
    is how late its real start came (the ticker's and the queue's delay), and
    ``starts_per_period`` the starts in each whole period after the first (the burst's).
    """
    interval = period_seconds / limit
    throttle = {"key": "api", "limit": limit, "period_seconds": period_seconds}
    with runtime(workers=workers) as rt:
        app = rt.app()
        tenant = "t" + uuid.uuid4().hex[:8]
        ids = [submit(app, JobSpec(task="bench.noop", tenant=tenant, payload={"i": i},
                                   throttle=throttle)).job.job_id for i in range(jobs)]
        done = wait_succeeded(app, ids, timeout=60 + 3 * jobs * interval)
    # In whole ms, as stored: a throttled job starts exactly at its turn, and in float
    # seconds a window of exactly k intervals can come out a hair short and count as over.
    starts_ms = sorted(job.started_at or 0 for job in done)
    period_ms = round(period_seconds * 1000)
    over = sum(1 for i, first in enumerate(starts_ms) for j in range(i, len(starts_ms))
               if (j - i + 1 - limit) * period_ms > (starts_ms[j] - first) * limit)
    starts = [ms / 1000 for ms in starts_ms]
    lost = sum(job.state is not JobState.SUCCEEDED for job in done)
    behind = [start - (starts[0] + max(0, k - limit + 1) * interval)
              for k, start in enumerate(starts)]
    periods: list[int] = []
    edge = starts[0] + period_seconds
    while edge < starts[-1]:
        periods.append(sum(edge <= s < edge + period_seconds for s in starts))
        edge += period_seconds
    full = periods[:-1] or periods  # the last period is cut off by the run's end
    steady = (len(starts) - limit) / (starts[-1] - starts[0]) if starts[-1] > starts[0] else 0
    return {
        "jobs": jobs, "limit": limit, "period_seconds": period_seconds, "burst": limit,
        "not_succeeded": lost, "over_bound": over,
        "starts_per_period": periods, "max_per_full_period": max(full, default=0),
        "mean_per_full_period": round(statistics.mean(full), 2) if full else 0,
        "steady_rate_per_second": round(steady, 2),
        "behind_slot_seconds": {"p50": round(statistics.median(behind), 3),
                                "p99": round(_percentile(behind, 0.99), 3),
                                "max": round(max(behind), 3)},
        "span_seconds": round(starts[-1] - starts[0], 2),
    }


if __name__ == "__main__":
    print(json.dumps({**measure_all(), "throttle": throttle_accuracy()}, indent=1))


LABELS = {
    "without_options": "no option", "concurrency_uncontended": "concurrency (no wait)",
    "throttle_under_rate": "throttle (under its rate)", "unique": "unique",
    "start_within": "start_within_seconds", "debounce_one_submission":
    "debounce (one submission)", "debounce_per_coalesced_submission":
    "debounce (per coalesced submission)",
}


def markdown(r: dict[str, Any] | None) -> list[str]:
    """BENCHMARKS.md's flow-control section (issue 22)."""
    if not r:
        return []
    wake = r["wake_up_seconds"]
    lines = [
        "", "## Flow control (issue 22)", "",
        f"Wake-up of a parked job, from the write that frees its key's slot to its own lease "
        f"({wake['jobs']} wakes on a key of limit 1, through the queue): **p50 "
        f"{wake['p50']:.3f} s, p99 {wake['p99']:.3f} s** (target p99 <= 1 s locally: "
        f"{'met' if wake['p99'] <= 1.0 else '**MISSED**'}).", "",
        "Per job, metered on the embedded emulator (requests, and DynamoDB write and read "
        "units of plain requests: the metering does not count a transaction's units, so "
        "compare requests where a row shows TransactWriteItems):", "",
        "| option | requests | write units | read units | by operation |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, label in LABELS.items():
        if name in r:
            row = r[name]
            ops = ", ".join(f"{op} {n:g}" for op, n in row["requests_by_operation"].items())
            lines.append(f"| {label} | {row['requests']:g} | {row['write_units']:g} | "
                         f"{row['read_units']:g} | {ops} |")
    lines += ["", "A job without options pays what it paid before flow control (the first "
                  "row against section 4)."]
    return lines + _throttle_markdown(r.get("throttle"))


def _throttle_markdown(t: dict[str, Any] | None) -> list[str]:
    if not t:
        return []
    behind = t["behind_slot_seconds"]
    return [
        "", f"Throttle accuracy: {t['jobs']} jobs submitted at once on one key throttled to "
        f"{t['limit']} per {t['period_seconds']:g} s (burst {t['burst']}), run by "
        "`leasehold dev` on the real clock. GCRA allows at most `burst + W / T` starts in any "
        f"window of W seconds (T = period / limit): **{t['over_bound']} windows over it** "
        f"(the guarantee: 0). {t['jobs'] - t['not_succeeded']} of {t['jobs']} succeeded "
        "(delayed, never dropped). Starts per whole period after the first (the burst's): "
        f"{', '.join(str(n) for n in t['starts_per_period'])}; the steady rate after the "
        f"burst {t['steady_rate_per_second']:g}/s against a limit of "
        f"{t['limit'] / t['period_seconds']:g}/s. A throttled job started behind its GCRA "
        f"turn by p50 {behind['p50']:.3f} s, p99 {behind['p99']:.3f} s, max "
        f"{behind['max']:.3f} s (the queue's delivery and the worker's poll), over "
        f"{t['span_seconds']:g} s."]
