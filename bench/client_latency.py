"""How long application code waits for a job's result: ``Client.submit(...).result()`` for an
echo job, one job at a time, from the submit to the result in hand (p50 and p99).

``python -m bench.client_latency [--jobs 50] [--workers 1]`` starts its own ``leasehold dev``;
``make bench`` runs :func:`measure` against the runtime it has running.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from bench.local import runtime
from bench.timing import percentile
from leasehold.client import Client


def measure(api: str, jobs: int, *, warmup: int = 3) -> dict[str, Any]:
    """Submit ``jobs`` echo jobs one after another and time each submit-to-result."""
    client = Client(api, tenant="bench-client")
    for i in range(warmup):  # the first requests build the API's resolver and clients
        client.submit("bench.echo", {"warmup": i}).result(timeout=60)
    seconds: list[float] = []
    requests: list[int] = []
    sent = [0]
    transport = client.transport

    def counted(*args: Any) -> Any:
        sent[0] += 1
        return transport(*args)

    client.transport = counted
    for i in range(jobs):
        sent[0] = 0
        started = time.perf_counter()
        result = client.submit("bench.echo", {"n": i}).result(timeout=60)
        seconds.append(time.perf_counter() - started)
        requests.append(sent[0])
        assert result == {"n": i}, result
    return {
        "jobs": jobs, "p50_s": round(percentile(seconds, 50), 3),
        "p99_s": round(percentile(seconds, 99), 3), "max_s": round(max(seconds), 3),
        "mean_s": round(sum(seconds) / len(seconds), 3),
        "requests_per_job": round(sum(requests) / len(requests), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.client_latency")
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    with runtime(workers=args.workers) as rt:
        print(json.dumps(measure(rt.api, args.jobs), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
