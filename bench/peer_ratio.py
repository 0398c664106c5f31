"""Issue 32's throughput target alone: ``POST /jobs`` (and ``POST /jobs/batch``) against the
Celery peer, 8 clients, on both substrates, runs interleaved (``make bench-peer``).

bench.front_door measures the same ratio once per substrate inside the whole bench; on a
machine shared with other work one pair of runs says little. Here, on each substrate, each pair
(after one unrecorded pair that warms the substrate) is: ``leasehold dev`` started afresh
(default limits, 2 worker processes of 4 threads, as bench.front_door), 8 clients of one tenant
through ``POST /jobs``, then the same through ``POST /jobs/batch`` (batches of :data:`BATCH`,
as ``Client.submit_many`` sends them), the runtime stopped; then the Celery peer
(bench.celery_peer, workers started afresh). Each run records the 1-minute load average before
it. The ratio of a pair is Leasehold's jobs/s over that pair's Celery jobs/s; the report gives
the median and the range over the pairs, and each run's CPU per job by role
(bench.process_cpu).

Celery has no batched send (``group.apply_async`` and ``chunks`` still send one SQS message
per task, kombu's SQS transport has no ``SendMessageBatch``), so the batch mode is compared
with the same Celery run: its best way to send many tasks is the one it has.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench import process_cpu
from bench.front_door import WORKERS, KeptClients, Submitted, api_run, submit_http
from bench.local import Runtime, runtime, wait_succeeded
from bench.substrate import SUBSTRATES, Substrate, started

#: Jobs per ``POST /jobs/batch`` (the API's limit, what ``Client.submit_many`` sends).
BATCH = 100
CLIENTS = 8


def load() -> float:
    return round(os.getloadavg()[0], 2)


def submit_batches(api: str, n: int, clients: int, tenant: str) -> Submitted:
    """``n`` echo jobs in ``POST /jobs/batch`` requests of :data:`BATCH` from ``clients``
    threads of one tenant; an item refused 429/503 is resent (alone in a later batch) after
    the largest ``retry_after`` of its batch."""
    kept = KeptClients(api, timeout=120)
    start = time.time()

    def one(first: int) -> list[str]:
        todo = list(range(first, min(first + BATCH, n)))
        ids: dict[int, str] = {}
        while todo:
            body = json.dumps({"jobs": [{"task": "bench.echo", "payload": i} for i in todo]})
            status, answer, _ = kept.post("/jobs/batch", body, tenant)
            if status != 200:
                raise RuntimeError(f"POST /jobs/batch: {status} {answer[:300]!r}")
            again, wait = [], 0.0
            for result in json.loads(answer)["results"]:
                item = todo[result["index"]]
                if result["status"] in (200, 201):
                    ids[item] = str(result["job"]["job_id"])
                elif result["status"] in (429, 503):
                    again.append(item)
                    wait = max(wait, float(result.get("retry_after") or 1))
                    kept.count(f"{result['status']} item")
                else:
                    raise RuntimeError(f"POST /jobs/batch item: {result}")
            todo = again
            if todo:
                time.sleep(wait)
        return [ids[i] for i in sorted(ids)]

    try:
        with ThreadPoolExecutor(clients) as pool:
            ids = [job for part in pool.map(one, range(0, n, BATCH)) for job in part]
    finally:
        kept.close()
    return Submitted(ids, start, time.time() - start, kept.refusals)


def batch_run(rt: Runtime, n: int, clients: int, *, timeout: float = 300) -> dict[str, Any]:
    app = rt.app()
    sent = submit_batches(rt.api, n, clients, "b" + uuid.uuid4().hex[:10])
    jobs = wait_succeeded(app, sent.ids, timeout=timeout, poll=1.0)
    elapsed = max(j.finished_at or 0 for j in jobs) / 1000 - sent.started
    return {"jobs": n, "clients": clients, "via": "api batch", "seconds": round(elapsed, 3),
            "jobs_per_second": round(n / elapsed, 1),
            "submitted_per_second": round(n / sent.seconds, 1),
            "succeeded": sum(1 for j in jobs if j.state.value == "SUCCEEDED"),
            "refusals": dict(sent.refusals)}


def leasehold_runs(substrate: Substrate, n: int, batch_jobs: int) -> dict[str, Any]:
    with runtime(workers=WORKERS, endpoint=substrate.endpoint, limited=True) as rt:
        warm = submit_http(rt.api, 2 * WORKERS, WORKERS, "warm" + uuid.uuid4().hex[:8])
        wait_succeeded(rt.app(), warm.ids, timeout=120, poll=0.2)
        single_load = load()
        cpu = process_cpu.Meter()
        single = api_run(rt, substrate, n, CLIENTS)
        single["cpu_ms_per_job"] = cpu.per_job(n)
        batch_load = load()
        cpu = process_cpu.Meter()
        batch = batch_run(rt, batch_jobs, CLIENTS)
        batch["cpu_ms_per_job"] = cpu.per_job(batch_jobs)
    return {"single": {**single, "load": single_load}, "batch": {**batch, "load": batch_load}}


def measure(name: str, pairs: int, n: int, batch_jobs: int) -> dict[str, Any]:
    from bench import celery_peer

    runs: list[dict[str, Any]] = []
    with started(name) as substrate:
        # One pair unrecorded first: DynamoDB Local's JVM compiles its hot paths as it
        # serves, and the first runs on a fresh one paid for that (its CPU per Leasehold job
        # fell from 37.8 ms in a first pair to 15.2 ms in the second), while the Celery run
        # after them met it warm.
        leasehold_runs(substrate, n, batch_jobs)
        celery_peer.measure(substrate, n, processes=WORKERS)
        for pair in range(pairs):
            ours = leasehold_runs(substrate, n, batch_jobs)
            celery_load = load()
            peer = celery_peer.measure(substrate, n, processes=WORKERS)
            run = {"pair": pair + 1, **ours, "celery": {**peer, "load": celery_load}}
            for mode in ("single", "batch"):
                run[mode]["ratio"] = round(run[mode]["jobs_per_second"]
                                           / peer["jobs_per_second"], 3)
            runs.append(run)
            print(json.dumps({"substrate": name, "pair": pair + 1, **{
                mode: (run[mode]["jobs_per_second"], run[mode].get("ratio"), run[mode]["load"],
                       {side: run[mode]["cpu_ms_per_job"][f"{side} total"]
                        for side in ("substrate", "system")})
                for mode in ("single", "batch", "celery")}}), flush=True)
    summary = {mode: {"median": statistics.median(r[mode]["ratio"] for r in runs),
                      "min": min(r[mode]["ratio"] for r in runs),
                      "max": max(r[mode]["ratio"] for r in runs)}
               for mode in ("single", "batch")}
    # Where the CPU goes, per job (medians over the pairs): the substrate's share against
    # the system's own (bench.process_cpu).
    cpu = {mode: {side: statistics.median(r[mode]["cpu_ms_per_job"][f"{side} total"]
                                          for r in runs)
                  for side in ("substrate", "system")}
           for mode in ("single", "batch", "celery")}
    return {"substrate": name, "runs": runs, "ratio": summary, "cpu_ms_per_job": cpu}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.peer_ratio")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=200, help="jobs per single-mode run")
    parser.add_argument("--batch-jobs", type=int, default=800,
                        help="jobs per batch-mode run (8 clients x 100 per request)")
    parser.add_argument("--substrate", choices=SUBSTRATES, action="append")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    out = [measure(name, args.pairs, args.jobs, args.batch_jobs)
           for name in (args.substrate or SUBSTRATES)]
    text = json.dumps(out, indent=2)
    if args.out:
        with open(args.out, "w") as sink:
            sink.write(text)
    print(json.dumps([{s["substrate"]: {"ratio": s["ratio"], "cpu_ms_per_job": s["cpu_ms_per_job"]}}
                      for s in out]))


if __name__ == "__main__":
    main()
