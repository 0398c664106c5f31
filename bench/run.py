"""Run the benchmark suite: ``python -m bench.run [--quick | --profile tiny] [--out DIR]``.

Writes ``results.json`` and the ``BENCHMARKS.md`` table. Sizes come from a profile: ``full``
(``make bench``, about 17 minutes on 2 cores), ``quick`` (``make bench-quick``, about 3
minutes) and ``tiny`` (the test suite's smoke run: proves it works, measures nothing useful).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from bench import (
    capacity,
    client_latency,
    coldstart,
    cost,
    durable,
    fairness,
    flow,
    front_door,
    front_door_report,
    idle,
    per_job,
    relay_cost,
    report,
    scaling,
    sweep_index,
    targets,
    tenant_shards,
    throughput,
    timing,
)
from bench.local import ROOT, runtime

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Profile:
    name: str
    #: Worker processes per throughput run; the timing runs use the last one's runtime.
    workers: tuple[int, ...]
    jobs: int
    floor_jobs: int
    queue_wait_seconds: float
    precision_seconds: float
    delayed_jobs: int
    stored: tuple[int, ...]
    shards: tuple[int, ...]
    shard_jobs: int
    import_runs: int
    handlers: tuple[str, ...] = coldstart.HANDLERS
    #: Jobs per kind metered for requests and units, and jobs timed without the meter.
    metered: int = 10
    timed: int = 30
    delays: tuple[float, float] = (2.0, 8.0)
    asset_method: str
    #: Wall-clock budget: a scaling size that would not fit is skipped (and reported).
    budget_seconds: float
    #: Heartbeats of the long jobs whose sweep-index units are metered (bench.sweep_index).
    heartbeats: tuple[int, ...] = (0, 30)
    #: The idle runtime: seconds to settle (its loops back off), then seconds counted.
    idle: tuple[float, float] = (35.0, 40.0)
    #: Echo jobs timed one at a time from ``Client.submit`` to ``result()``.
    client_jobs: int = 50
    #: Measure precision again on the emulator's 1 s SQS delay tick (its own runtime).
    on_a_tick: bool = True
    #: The front door under concurrency (issue 21), on each of these substrates.
    door: front_door.Sizes = field(default_factory=front_door.Sizes)
    substrates: tuple[str, ...] = ("emulator", "dynamodb_local")


PROFILES = {
    "full": Profile(name="full", workers=(1, 4, 2), jobs=300, floor_jobs=300,
                    queue_wait_seconds=45, precision_seconds=40, delayed_jobs=20,
                    stored=(1_000, 10_000, 100_000), shards=(1, 8, 32), shard_jobs=150,
                    import_runs=10, asset_method="infra", budget_seconds=19 * 60),
    # Trimmed to stay under 2 minutes with every section in it (it took 126 s with 3 runtimes).
    "quick": Profile(name="quick", workers=(1, 2), jobs=30, floor_jobs=60,
                     queue_wait_seconds=5, precision_seconds=8, delayed_jobs=4,
                     delays=(1.0, 4.0), stored=(500, 2_000), shards=(1, 8), shard_jobs=30,
                     import_runs=3, metered=5, timed=10, asset_method="venv",
                     budget_seconds=100, heartbeats=(0, 6), idle=(1.0, 3.0),
                     door=front_door.Sizes(
                         jobs=40, floor_jobs=40, paced_seconds=3.0, queue_wait_seconds=5.0,
                         precision_seconds=6.0, delayed_jobs=3, delays=(1.0, 3.0),
                         idle=(3.0, 5.0), cost_calls=50)),
    "tiny": Profile(name="tiny", workers=(1,), jobs=8, floor_jobs=10,
                    queue_wait_seconds=2, precision_seconds=5, delayed_jobs=2,
                    stored=(100,), shards=(1,), shard_jobs=8, import_runs=1,
                    asset_method="skip", budget_seconds=60, handlers=("worker",),
                    metered=2, timed=2, delays=(1.0, 2.0), heartbeats=(0,),
                    idle=(0.0, 1.0), client_jobs=3, on_a_tick=False,
                    # No Celery (the bench extra is not a test dependency), the emulator only.
                    door=front_door.Sizes(jobs=4, clients=(2,), paced_clients=4,
                                          paced_seconds=0.2, floor_jobs=4, celery=False,
                                          cost_calls=5),
                    substrates=("emulator",)),
}

#: Durable jobs whose resume after a sleep and after a callback is timed (bench.durable).
DURABLE_RESUMES = {"full": 20, "quick": 5, "tiny": 0}
#: Jobs whose stream records the relay's cost is measured over (bench.relay_cost).
RELAY_JOBS = {"full": 300, "quick": 50, "tiny": 5}
#: Wake-ups on a key of limit 1 timed by bench.flow, jobs run through a throttle of 10/s
#: (bench.flow.throttle_accuracy: beyond its burst of 10 in the tiny profile too) and HTTP
#: target calls held against a host limit (bench.targets.limit_accuracy).
FLOW_WAKES = {"full": 40, "quick": 10, "tiny": 3}
THROTTLE_JOBS = {"full": 60, "quick": 30, "tiny": 16}
TARGET_LIMIT_JOBS = {"full": 40, "quick": 20, "tiny": 10}
#: Jobs one big tenant submits per layout (bench.tenant_shards), within each profile's budget.
TENANT_JOBS = {"full": 400, "quick": 20, "tiny": 0}


class Run:
    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.started = time.monotonic()
        self.loads: dict[str, list[float]] = {}
        self.seconds: dict[str, float] = {}

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def section(self, name: str, body: Callable[[], T]) -> T:
        self.loads[name] = [round(v, 2) for v in os.getloadavg()]
        print(f"[bench {self.elapsed():6.1f}s] {name} (load {self.loads[name][0]:.1f})",
              file=sys.stderr, flush=True)
        started = time.monotonic()
        try:
            return body()
        finally:
            self.seconds[name] = round(time.monotonic() - started, 1)


def _throughput(run: Run) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any],
                                   dict[str, Any], dict[str, Any]]:
    p = run.profile
    floor = run.section("floor", lambda: throughput.floor(p.floor_jobs))
    runs = []
    queue: dict[str, Any] = {}
    precise: dict[str, Any] = {}
    fair: dict[str, Any] = {}
    client: dict[str, Any] = {}
    for workers in p.workers:
        with runtime(workers=workers) as rt:
            library = run.section(f"throughput library x{workers}",
                                  lambda: throughput.library(rt, p.jobs))
            http = run.section(f"throughput http x{workers}",
                               lambda: throughput.http(rt, p.jobs))
            runs.append({
                "workers": workers, "library": library, "http": http,
                "ratio_library": round(library["jobs_per_second"] / floor["jobs_per_second"], 3),
                "ratio_http": round(http["jobs_per_second"] / floor["jobs_per_second"], 3),
            })
            if workers == p.workers[-1]:
                capacity = float(library["jobs_per_second"])
                queue = run.section("queue wait", partial(
                    timing.queue_wait, rt, capacity / 2, p.queue_wait_seconds))
                queue.update({"workers": workers, "capacity_jobs_per_second": capacity})
                precise = run.section("precision", lambda: timing.precision(
                    rt, p.precision_seconds, p.delayed_jobs, p.delays))
                precise["workers"] = workers
                fair = run.section("fairness", partial(
                    fairness.noisy_neighbour, rt, capacity, fairness.SECONDS.get(p.name, 3.0)))
                fair["workers"] = workers
                client = run.section("client latency", partial(
                    client_latency.measure, rt.api, p.client_jobs))
                client["workers"] = workers
    # In a runtime of its own (after the last one stopped): its emulator ticks.
    if p.on_a_tick:
        precise["on_a_tick"] = run.section("precision on a 1 s SQS tick", partial(
            timing.precision_on_a_tick, p.workers[-1], p.precision_seconds, p.delayed_jobs,
            p.delays))
    return {"floor": floor, "runs": runs}, queue, precise, fair, client


def _scaling(run: Run) -> dict[str, Any]:
    p = run.profile
    stored: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    previous: tuple[int, float] | None = None
    for size in p.stored:
        if previous is not None:
            # Loading and passes in moto grow linearly with the stored jobs.
            estimate = previous[1] * size / previous[0]
            left = p.budget_seconds - run.elapsed()
            if estimate > left:
                skipped.append({"stored_jobs": size, "estimated_seconds": round(estimate),
                                "seconds_left": round(left),
                                "reason": "would not fit in the run's time budget"})
                continue
        started = time.monotonic()
        stored += run.section(f"scaling {size}", partial(scaling.passes, [size]))
        previous = (size, time.monotonic() - started)
    return {"stored": stored, "skipped": skipped}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full")
    parser.add_argument("--quick", action="store_true", help="same as --profile quick")
    parser.add_argument("--out", type=Path, default=None,
                        help="directory for results.json and BENCHMARKS.md "
                             "(default: bench/results.json and ./BENCHMARKS.md)")
    parser.add_argument("--render", action="store_true",
                        help="only rewrite BENCHMARKS.md from an existing results.json")
    args = parser.parse_args(argv)
    json_path = (args.out / "results.json") if args.out else ROOT / "bench" / "results.json"
    md_path = (args.out / "BENCHMARKS.md") if args.out else ROOT / "BENCHMARKS.md"
    if args.render:
        md_path.write_text(report.markdown(json.loads(json_path.read_text())))
        return 0
    profile = PROFILES["quick" if args.quick else args.profile]
    run = Run(profile)
    results: dict[str, Any] = {
        "profile": profile.name,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {
            "cores": os.cpu_count(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
                                / 2**30, 1),
            "python": platform.python_version(), "platform": platform.platform(),
        },
    }
    results["per_job"] = run.section("requests per job", lambda: per_job.measure_all(
        batch=profile.metered, timed=profile.timed))
    results["flow"] = run.section("flow control", lambda: flow.measure_all(
        wakes=FLOW_WAKES[profile.name]))
    if results["flow"]:
        results["flow"]["throttle"] = run.section("throttle accuracy", lambda: (
            flow.throttle_accuracy(jobs=THROTTLE_JOBS[profile.name])))
    results["targets"] = run.section("HTTP targets", lambda: {
        "per_job": targets.per_job(), "limit": targets.limit_accuracy(
            jobs=TARGET_LIMIT_JOBS[profile.name])})
    results["sweep_index"] = run.section("sweep index", lambda: sweep_index.long_jobs(
        profile.heartbeats, batch=3 if profile.name == "full" else 2))
    results["relay_cost"] = run.section("relay cost", lambda: relay_cost.measure(
        RELAY_JOBS[profile.name]))
    results["durable"] = run.section("durable execution", lambda: durable.measure(
        steps=10, jobs=profile.metered, resumes=DURABLE_RESUMES[profile.name]))
    (results["throughput"], results["queue_wait"], results["precision"],
     results["fairness"], results["client_result"]) = _throughput(run)
    results["idle"] = run.section("idle runtime", lambda: idle.measure(
        settle_seconds=profile.idle[0], seconds=profile.idle[1],
        pause_seconds=1.0 if profile.name == "full" else 0.3))
    results["front_door"] = {name: front_door.measure(name, profile.door,
                                                      section=run.section)
                             for name in profile.substrates}
    shards = run.section("submission by shards", lambda: scaling.submission_by_shards(
        profile.shards, profile.shard_jobs))
    one_tenant = run.section("one big tenant", lambda: tenant_shards.measure(
        TENANT_JOBS[profile.name]))
    results["cold_start"] = {
        "imports": run.section("imports", lambda: coldstart.import_times(
            profile.import_runs, profile.handlers)),
        "asset": run.section("asset", lambda: coldstart.asset_size(profile.asset_method)),
    }
    results["scaling"] = _scaling(run)
    results["scaling"]["submission_by_shards"] = shards
    results["scaling"]["one_tenant"] = one_tenant
    results["cost"] = cost.model(results["per_job"], results["scaling"]["stored"])
    results["cost"]["under_concurrency"] = cost.under_concurrency(
        results["front_door"], results["per_job"])
    results["load"] = {"at_sections": run.loads, "at_end": [round(v, 2)
                                                            for v in os.getloadavg()]}
    results["section_seconds"] = run.seconds
    results["duration_seconds"] = round(run.elapsed(), 1)
    results["targets"] = report.targets(results)
    results["front_door_targets"] = front_door_report.targets(results)

    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n")
    md_path.write_text(report.markdown(results))
    capacity_path = (args.out / "capacity.md") if args.out else ROOT / "docs" / "capacity.md"
    capacity_path.write_text(capacity.markdown(results))
    print(f"[bench {run.elapsed():6.1f}s] wrote {json_path} and {md_path}", file=sys.stderr)
    for target in results["targets"]:
        print(f"  {'met   ' if target['met'] else 'MISSED'}  {target['name']}: "
              f"{target['measured']} (target {target['target']})", file=sys.stderr)
    for row in results["front_door_targets"]:
        print(f"  {row['measure']} (target {row['target']}): " + ", ".join(
            f"{name} {cell['text']}{'' if cell['met'] else ' MISSED'}"
            for name, cell in row["by_substrate"].items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
