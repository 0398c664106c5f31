"""Where ``POST /jobs`` (or ``POST /jobs/batch``) spends its time in the API process
(issue 32's throughput against Celery): cProfile of the API handler, as ``leasehold dev``'s
gateway calls it, from 8 threads at once, on a fresh embedded emulator (a child process, as
``leasehold dev``'s); and each AWS request the handler makes, counted and timed.

``python -m bench.profile_api [--batch] [--jobs N]``; prints the top functions by own time
and by cumulative time, summed over the threads.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

CLIENTS = 8


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_api")
    parser.add_argument("--jobs", type=int, default=400)
    parser.add_argument("--batch", action="store_true", help="POST /jobs/batch of 100")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)

    from bench.local import fake_credentials
    from leasehold.api.app import handle
    from leasehold.api.context import ApiConfig
    from leasehold.aws.clients import Clients
    from leasehold.aws.provision import create_all
    from leasehold.compose import compose
    from leasehold.core.registry import load_modules
    from leasehold.local import emulator
    from leasehold.local.gateway import proxy_event
    from leasehold.settings import Settings

    fake_credentials()
    load_modules(("bench.tasks",))
    server = emulator.start()
    try:
        settings = Settings(endpoint_url=server.endpoint, task_modules=("bench.tasks",))
        create_all(Clients(settings), settings)
        app = compose(settings)
        config = ApiConfig.from_env({"LEASEHOLD_TRUST_TENANT_HEADER": "1"})
        calls: Counter[str] = Counter()
        seconds: Counter[str] = Counter()
        lock = threading.Lock()
        local = threading.local()

        def before(model: Any, **_: Any) -> None:
            local.started = time.perf_counter()

        def after(model: Any, **_: Any) -> None:
            with lock:
                calls[model.name] += 1
                seconds[model.name] += time.perf_counter() - local.started

        for client in (app.clients.dynamodb, app.clients.sqs):
            client.meta.events.register("before-call", before)
            client.meta.events.register("after-call", after)
        size = 100 if args.batch else 1
        path = "/jobs/batch" if args.batch else "/jobs"
        profiles: list[cProfile.Profile] = []
        latencies: list[float] = []

        def send(first: int) -> None:
            profile = getattr(local, "profile", None)
            if profile is None:
                profile = local.profile = cProfile.Profile()
                with lock:
                    profiles.append(profile)
            items = list(range(first, min(first + size, args.jobs)))
            body = (json.dumps({"jobs": [{"task": "bench.echo", "payload": i} for i in items]})
                    if args.batch else json.dumps({"task": "bench.echo", "payload": first}))
            event = proxy_event("POST", path, {"Content-Type": "application/json",
                                               "X-Leasehold-Tenant": "p"}, body)
            start = time.perf_counter()
            profile.enable()
            answer = handle(app, event, None, config)
            profile.disable()
            latencies.append(time.perf_counter() - start)
            if int(answer["statusCode"]) >= 300:
                raise RuntimeError(f"{path}: {answer['statusCode']} {answer['body'][:300]}")

        # Warm: the first request builds the resolver and connects the clients.
        send(0)
        calls.clear()
        seconds.clear()
        latencies.clear()
        for profile in profiles:
            profile.clear()
        started = time.perf_counter()
        with ThreadPoolExecutor(CLIENTS) as pool:
            list(pool.map(send, range(0, args.jobs, size)))
        elapsed = time.perf_counter() - started
    finally:
        server.stop()
    stats: pstats.Stats | None = None
    for profile in profiles:
        profile.create_stats()
        if not profile.stats:
            continue  # the warm request's thread, cleared
        if stats is None:
            stats = pstats.Stats(profile)
        else:
            stats.add(profile)
    assert stats is not None
    latencies.sort()
    print(json.dumps({
        "path": path, "jobs": args.jobs, "clients": CLIENTS, "seconds": round(elapsed, 3),
        "jobs_per_second": round(args.jobs / elapsed, 1),
        "request_ms_median": round(1000 * latencies[len(latencies) // 2], 1),
        "aws_requests_per_job": {op: round(n / args.jobs, 3) for op, n in calls.most_common()},
        "aws_ms_per_call": {op: round(1000 * seconds[op] / calls[op], 2) for op in calls},
        "aws_seconds_summed_over_threads": round(sum(seconds.values()), 2),
    }, indent=2))
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        stats.stream = out  # type: ignore[attr-defined]
        stats.sort_stats(order).print_stats(args.top)
        print(out.getvalue())


if __name__ == "__main__":
    main()
