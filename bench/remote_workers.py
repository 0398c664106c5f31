"""Poll-to-start latency of a worker over HTTP (issue 34): ``make bench-remote``.

One ``leasehold dev`` with the conformance tasks external, one reference worker idle in its
long poll (warm); each job is submitted alone, after the worker has been idle a moment, and
its latency is from the submission's answer to the worker's ``start`` line (both clocks are
this machine's). Prints p50/p99 per language; a language whose worker is not built is
reported as such. ``python -m bench.remote_workers [N] [language ...]``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.conformance.conftest import POOL, TASKS, Workers, lines
from tests.e2e.conftest import start_runtime


def measure(language: str, samples: int) -> list[float]:
    runtime = start_runtime("--workers", "0", "--external", f"{POOL}:{TASKS}", "--in-memory")
    workers = Workers(runtime)
    try:
        workers.start(language, wait_seconds=20)
        log = Path(tempfile.mkdtemp(prefix="leasehold-bench-")) / "starts.log"
        latencies: list[float] = []
        for _ in range(samples):
            time.sleep(0.5)  # the worker is back in its long poll
            job_id = runtime.submit({"task": "conformance.echo", "payload": {"log": str(log)}},
                                    tenant="bench")["job_id"]
            submitted = time.time() * 1000
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                started = [int(line[4]) for line in lines(log) if line[1] == job_id]
                if started:
                    latencies.append(started[0] - submitted)
                    break
                time.sleep(0.005)
        return latencies
    finally:
        workers.stop_all()
        runtime.stop()


def main(argv: list[str]) -> None:
    samples = int(argv[0]) if argv else 50
    languages = argv[1:] or ["python", "typescript", "java"]
    for language in languages:
        try:
            found = measure(language, samples)
        except BaseException as exc:  # pytest.fail for a worker that is not built
            print(f"{language}: not measured ({str(exc).splitlines()[0]})")
            continue
        ordered = sorted(found)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        print(f"{language}: {len(found)} jobs, poll-to-start p50 "
              f"{statistics.median(found):.0f} ms, p99 {p99:.0f} ms, max {ordered[-1]:.0f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
