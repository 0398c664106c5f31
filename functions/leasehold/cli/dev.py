"""``leasehold dev`` (the whole system locally) and ``leasehold worker`` (a polling worker)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from typing import Any

from leasehold.errors import LeaseholdError


def register(subparsers: Any) -> None:
    dev = subparsers.add_parser(
        "dev", help="run API, workers, sweeper and ticker locally",
        description="Run the whole scheduler on this machine, on an embedded AWS emulator "
                    "unless --endpoint is given.")
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=8080, help="API port (0: any free port)")
    dev.add_argument("--workers", type=int, default=2, help="worker processes per pool")
    dev.add_argument("--concurrency", type=int, default=4, help="polling threads per worker")
    dev.add_argument("--batch-size", type=int, default=5)
    dev.add_argument("--tasks", default="examples.tasks",
                     help="comma-separated task modules to import (default: examples.tasks)")
    dev.add_argument("--pools", default="default", help="comma-separated pools")
    dev.add_argument("--endpoint", default=os.environ.get("AWS_ENDPOINT_URL"),
                     help="use this AWS endpoint (real AWS or another emulator) instead of "
                          "the embedded one")
    dev.add_argument("--provision", action="store_true",
                     default=bool(os.environ.get("LEASEHOLD_PROVISION")),
                     help="with --endpoint: create the tables and queues that are missing "
                          "(else a missing one stops the start, named)")
    dev.add_argument("--lease-seconds", type=float, default=30.0)
    dev.add_argument("--sweep-seconds", type=float, default=2.0)
    dev.add_argument("--tick-seconds", type=float, default=1.0)
    dev.add_argument("--heartbeat-seconds", type=float, default=2.0)
    dev.add_argument("--drain-seconds", type=float, default=30.0)
    dev.add_argument("--leader-lease-seconds", type=float, default=10.0,
                     help="the ticker's leader lease: a standby runtime or ECS ticker on the "
                          "same tables takes over this long after the leader dies")
    dev.add_argument("--lookahead-seconds", type=float, default=None,
                     help="how far ahead the ticker fires jobs and schedules (default: 90, "
                          "as the once-a-minute Lambda ticker)")
    dev.add_argument("--event-log",
                     default=os.environ.get("LEASEHOLD_EVENT_LOG", ".leasehold/events.jsonl"),
                     help="where job state events are written (what `leasehold events tail` "
                          "reads); LEASEHOLD_EVENT_BUS, if set, wins")
    dev.set_defaults(run=run_dev)

    worker = subparsers.add_parser(
        "worker", help="run a long-running polling worker (ECS)",
        description="Poll a pool's queues and run its jobs until SIGTERM; settings come from "
                    "the LEASEHOLD_* and AWS_* environment.")
    worker.add_argument("--pool", default="default")
    worker.add_argument("--concurrency", type=int, default=4)
    worker.add_argument("--batch-size", type=int, default=5)
    worker.add_argument("--heartbeat-seconds", type=float, default=5.0)
    worker.add_argument("--drain-seconds", type=float, default=30.0)
    worker.add_argument("--tasks", default=None, help="task modules (else LEASEHOLD_TASKS)")
    worker.add_argument("--parent", type=int, default=None, help=argparse.SUPPRESS)
    worker.set_defaults(run=run_worker)


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def run_dev(args: argparse.Namespace) -> int:
    from leasehold.local.runtime import PortBusy, Runtime, RuntimeOptions

    if args.leader_lease_seconds < 2 * args.tick_seconds:
        # The leader renews once a tick; a lease shorter than two ticks lapses between
        # renewals and leadership flaps between runtimes.
        print("leasehold dev: --leader-lease-seconds must be at least twice --tick-seconds",
              file=sys.stderr)
        return 2
    options = RuntimeOptions(
        host=args.host, port=args.port, workers=args.workers, concurrency=args.concurrency,
        batch_size=args.batch_size, tasks=_split(args.tasks), pools=_split(args.pools),
        endpoint=args.endpoint, lease_seconds=args.lease_seconds,
        sweep_seconds=args.sweep_seconds, tick_seconds=args.tick_seconds,
        heartbeat_seconds=args.heartbeat_seconds, drain_seconds=args.drain_seconds,
        leader_lease_seconds=args.leader_lease_seconds,
        event_log=args.event_log, provision=args.provision)
    if args.lookahead_seconds is not None:
        options.lookahead_seconds = args.lookahead_seconds
    runtime = Runtime(options)
    try:
        runtime.start()
    except PortBusy as exc:
        print(f"leasehold dev: {exc}", file=sys.stderr)
        return 2
    except (LeaseholdError, RuntimeError) as exc:
        print(f"leasehold dev: could not start: {exc}", file=sys.stderr)
        runtime.stop()
        return 1
    runtime.run_until_signalled()
    return 0


def _watch_parent(parent: int, stop: Any) -> None:
    # A worker started by `leasehold dev` must not outlive it (it may be SIGKILLed).
    while os.getppid() == parent:
        time.sleep(0.5)
    stop()


def run_worker(args: argparse.Namespace) -> int:
    from leasehold.lifecycle.app import Leasehold
    from leasehold.local.poller import PollerOptions, PollingWorker
    from leasehold.local.task_protection import TaskProtection
    from leasehold.settings import Settings

    overrides: dict[str, Any] = {}
    if args.tasks:
        overrides["task_modules"] = _split(args.tasks)
    app = Leasehold.from_settings(Settings.from_env(**overrides))
    poller = PollingWorker(app, PollerOptions(
        pool=args.pool, concurrency=args.concurrency, batch_size=args.batch_size,
        heartbeat_seconds=args.heartbeat_seconds), protection=TaskProtection.from_env())
    interrupts = 0

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal interrupts
        if signum == signal.SIGINT:
            interrupts += 1
            if interrupts > 1:
                os._exit(130)  # a second Ctrl-C: stop now; the sweeper recovers the jobs
        poller.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.parent:
        threading.Thread(target=_watch_parent, args=(args.parent, poller.stop),
                         daemon=True).start()
    poller.run(drain_seconds=args.drain_seconds)
    return 0
