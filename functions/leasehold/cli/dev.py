"""``leasehold dev`` (the whole system locally) and ``leasehold worker`` (a polling worker)."""

from __future__ import annotations

import argparse
import gc
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from leasehold.cli.parsing import command
from leasehold.errors import LeaseholdError


def register(subparsers: Any) -> None:
    dev = command(subparsers, "dev", "run the API, workers, sweeper and ticker on this machine "
                                     "(an embedded AWS emulator unless --endpoint is given)", [
        "leasehold dev",
        "leasehold dev --port 9000 --workers 4",
        "leasehold dev --tasks examples.tasks,examples.workflow_tasks",
        "leasehold dev --fresh                 # start empty (the old state is kept as .old.<n>)",
        "leasehold dev --tasks myapp.tasks --reload   # restart workers when tasks change",
        "leasehold dev --endpoint http://localhost:4566",
        "leasehold dev --dynamodb local        # AWS's DynamoDB Local (make ddblocal installs it)",
        "leasehold dev --regions a,b,c         # three cells, a drill: leasehold regions isolate a",
        "leasehold dev --regions a,b --dynamodb local   # the cells on DynamoDB Local",
    ], run_dev, client=False)
    dev.add_argument("--host", default="127.0.0.1",
                     help="address the API and the embedded emulator listen on; 0.0.0.0 "
                          "lets every machine that reaches yours use them, unauthenticated "
                          "(see README), e.g. --host 0.0.0.0")
    dev.add_argument("--allow-host", action="append", default=[], metavar="NAME[:PORT]",
                     help="another name the API answers to (its Host header; 127.0.0.1, "
                          "localhost and --host always are), repeatable, e.g. --host 0.0.0.0 "
                          "--allow-host devbox.lan")
    dev.add_argument("--port", type=int, default=8080,
                     help="API port (0: any free port), e.g. --port 9000")
    dev.add_argument("--workers", type=int, default=2,
                     help="worker processes per pool, e.g. --workers 4")
    dev.add_argument("--concurrency", type=int, default=4,
                     help="polling threads per worker, e.g. --concurrency 8")
    dev.add_argument("--batch-size", type=int, default=5,
                     help="messages a worker receives at once (1-10), e.g. --batch-size 1")
    dev.add_argument("--tasks", default="examples.tasks",
                     help="comma-separated task modules to import (default: examples.tasks), "
                          "e.g. --tasks myapp.tasks,examples.tasks")
    dev.add_argument("--pools", default="default",
                     help="comma-separated pools, e.g. --pools default,gpu")
    dev.add_argument("--external", action="append", default=[], metavar="POOL:TASK[,TASK]",
                     help="tasks run by workers in any language over HTTP (POST "
                          "/workers/lease); the pool gets queues and no Python worker; "
                          "repeatable, e.g. --external images:resize,crop; with per-task "
                          "policies, a JSON object: --external 'images:{\"resize\": "
                          "{\"timeout_seconds\": 60, \"max_attempts\": 3}}'")
    dev.add_argument("--endpoint", default=os.environ.get("AWS_ENDPOINT_URL"),
                     help="use this AWS endpoint (real AWS or another emulator) instead of "
                          "the embedded one, e.g. --endpoint http://localhost:4566")
    dev.add_argument("--dynamodb", choices=("emulator", "local"), default="emulator",
                     help="which DynamoDB runs behind the runtime: the embedded emulator "
                          "(kept in --state-dir), or AWS's DynamoDB Local, for its throughput "
                          "and its write units (in memory: nothing kept; SQS and EventBridge "
                          "stay on the emulator; `make ddblocal` installs it), e.g. "
                          "--dynamodb local")
    dev.add_argument("--regions", default=None, metavar="REGION,REGION[,...]",
                     help="run one cell per Region, each a whole runtime with its own "
                          "emulator, state dir (--state-dir/REGION) and API port (--port, "
                          "the next, ...), sharing a control table; `leasehold regions "
                          "isolate REGION` takes one off while it runs (docs/regions.md); "
                          "with --dynamodb local each cell has a DynamoDB Local of its own, "
                          "e.g. --regions a,b,c")
    dev.add_argument("--provision", action="store_true",
                     default=bool(os.environ.get("LEASEHOLD_PROVISION")),
                     help="with --endpoint: create the tables and queues that are missing "
                          "(else a missing one stops the start, named), e.g. --endpoint "
                          "http://localhost:4566 --provision")
    dev.add_argument("--state-dir", default=os.environ.get("LEASEHOLD_STATE_DIR", ".leasehold"),
                     help="where the embedded emulator's tables are saved and loaded when you "
                          "start (default .leasehold, or $LEASEHOLD_STATE_DIR); one runtime "
                          "at a time, e.g. --state-dir /tmp/lh")
    dev.add_argument("--fresh", action="store_true",
                     help="start empty: move the saved state and event log aside "
                          "(*.old.1, *.old.2, ...)")
    dev.add_argument("--save-seconds", type=float, default=1.0,
                     help="how often to save what changed, so a killed runtime loses about "
                          "this much (0: only on stop), e.g. --save-seconds 5")
    dev.add_argument("--in-memory", action="store_true",
                     help="keep nothing: neither load nor save the state (benchmarks, demos)")
    dev.add_argument("--reload", action="store_true",
                     help="watch the --tasks modules' files: on a change, import them again "
                          "and restart the workers (running jobs finish first)")
    dev.add_argument("--lease-seconds", type=float, default=30.0,
                     help="job lease length, e.g. --lease-seconds 10")
    dev.add_argument("--sweep-seconds", type=float, default=2.0,
                     help="how often the sweeper runs, e.g. --sweep-seconds 1")
    dev.add_argument("--tick-seconds", type=float, default=1.0,
                     help="how often the ticker runs, e.g. --tick-seconds 0.5")
    dev.add_argument("--idle-sweep-seconds", type=float, default=16.0,
                     help="while sweeps find nothing, slow down to this (never beyond half "
                          "the lease or the hand-off period; 0: never), e.g. "
                          "--idle-sweep-seconds 4")
    dev.add_argument("--idle-tick-seconds", type=float, default=45.0,
                     help="while ticks find nothing, slow down to this (never beyond half "
                          "the look-ahead; 0: never), e.g. --idle-tick-seconds 5")
    dev.add_argument("--heartbeat-seconds", type=float, default=2.0,
                     help="how often workers extend their leases, e.g. --heartbeat-seconds 1")
    dev.add_argument("--drain-seconds", type=float, default=30.0,
                     help="how long Ctrl-C lets running jobs finish, e.g. --drain-seconds 5")
    dev.add_argument("--leader-lease-seconds", type=float, default=30.0,
                     help="the ticker's leader lease, renewed every third of it: a standby "
                          "runtime or ECS ticker on the same tables takes over this long "
                          "after the leader dies, e.g. 10")
    dev.add_argument("--lookahead-seconds", type=float, default=None,
                     help="how far ahead the ticker fires jobs and schedules (default: 90, "
                          "as the once-a-minute Lambda ticker), e.g. --lookahead-seconds 5")
    dev.add_argument("--event-log", default=os.environ.get("LEASEHOLD_EVENT_LOG"),
                     help="where job state events are written, what `leasehold events tail` "
                          "reads (default: events.jsonl in --state-dir, or "
                          "$LEASEHOLD_EVENT_LOG; LEASEHOLD_EVENT_BUS, if set, wins), e.g. "
                          "--event-log /tmp/events.jsonl")

    dev.add_argument("--tenant-rate", type=float, default=None,
                     help="submissions per second each tenant earns (default 50, or "
                          "$LEASEHOLD_TENANT_RATE; a tenant's plan overrides it), e.g. "
                          "--tenant-rate 5")
    dev.add_argument("--tenant-burst", type=float, default=None,
                     help="submissions each tenant may make at once (default 200), e.g. "
                          "--tenant-burst 20")
    dev.add_argument("--tenant-max-live", type=int, default=None,
                     help="live jobs each tenant may have, its API submissions and their "
                          "children alike (default 10000; 0: no cap), e.g. "
                          "--tenant-max-live 100")
    dev.add_argument("--max-backlog", type=int, default=None,
                     help="visible messages in a pool's queues past which every submission "
                          "gets 503 (default 100000), e.g. --max-backlog 1000")
    dev.add_argument("--otlp", default=None, metavar="URL",
                     help="export traces over OTLP/HTTP to URL (e.g. http://127.0.0.1:4318) "
                          "from the API, the workers, the ticker and the sweeper; the "
                          "OTEL_* environment does the same (needs leasehold[otel])")

    worker = command(subparsers, "worker", "run a long-running polling worker (what ECS "
                                           "runs); settings come from the LEASEHOLD_* and "
                                           "AWS_* environment", [
        "leasehold worker --pool default",
        "LEASEHOLD_TASKS=myapp.tasks leasehold worker --pool gpu --concurrency 2",
    ], run_worker, client=False)
    worker.add_argument("--pool", default="default", help="the pool to serve, e.g. --pool gpu")
    worker.add_argument("--concurrency", type=int, default=4,
                        help="polling threads, e.g. --concurrency 8")
    worker.add_argument("--batch-size", type=int, default=5,
                        help="messages received at once (1-10), e.g. --batch-size 1")
    worker.add_argument("--heartbeat-seconds", type=float, default=5.0,
                        help="how often leases are extended, e.g. --heartbeat-seconds 5")
    worker.add_argument("--drain-seconds", type=float, default=30.0,
                        help="how long SIGTERM lets running jobs finish, e.g. 30")
    worker.add_argument("--tasks", default=None,
                        help="task modules (else $LEASEHOLD_TASKS), e.g. --tasks myapp.tasks")
    worker.add_argument("--parent", type=int, default=None, help=argparse.SUPPRESS)


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def run_dev(args: argparse.Namespace) -> int:
    # Imports here, not at the top: every `leasehold` command imports this module.
    from leasehold.local.gateway import OwnAddress
    from leasehold.tracing.setup import configure as configure_tracing
    from leasehold.tracing.setup import otlp_environment

    if args.leader_lease_seconds < 2 * args.tick_seconds:
        # A standby asks once a tick; a lease shorter than two ticks would let leadership
        # flap between runtimes.
        print("leasehold dev: --leader-lease-seconds must be at least twice --tick-seconds",
              file=sys.stderr)
        return 2
    try:
        OwnAddress.of(args.host, args.port, args.allow_host)
    except ValueError as exc:
        print(f"leasehold dev: --allow-host: {exc}", file=sys.stderr)
        return 2
    if args.otlp:  # the workers it starts inherit the environment
        os.environ.update(otlp_environment(args.otlp))
    configure_tracing("leasehold")
    from leasehold.errors import ValidationError
    from leasehold.settings import check_external_policies, external_declarations
    try:
        external, policies = external_declarations(args.external)
        check_external_policies(external, policies)
    except ValidationError as exc:
        print(f"leasehold dev: --external: {exc}", file=sys.stderr)
        return 2
    if os.environ.get("LEASEHOLD_TARGETS") and \
            all(pool in external for pool in _split(args.pools)):
        # Jobs with no code run on a Python worker; an external pool's remote workers would
        # be handed leasehold.http and its payload, and no Python worker would run it.
        print(f"leasehold dev: LEASEHOLD_TARGETS configures jobs with no code, which run on "
              f"a Python pool, and every pool ({args.pools}) is external: add one to --pools",
              file=sys.stderr)
        return 2
    if args.regions:
        from leasehold.local import regions

        return regions.run(args)
    if args.dynamodb == "local":
        if args.endpoint:
            print("leasehold dev: --dynamodb local runs its own endpoint: drop --endpoint "
                  "(or AWS_ENDPOINT_URL)", file=sys.stderr)
            return 2
        from leasehold.local import dynamodb_local
        try:
            substrate = dynamodb_local.substrate()
        except (dynamodb_local.Unavailable, RuntimeError) as exc:
            print(f"leasehold dev: --dynamodb local: {exc}", file=sys.stderr)
            return 1
        # The workers it starts inherit these; DynamoDB Local and moto take any key.
        for name, value in (("AWS_ACCESS_KEY_ID", "testing"),
                            ("AWS_SECRET_ACCESS_KEY", "testing"),
                            ("AWS_DEFAULT_REGION", "us-east-1")):
            os.environ.setdefault(name, value)
        args.endpoint, args.provision, args.in_memory = substrate.endpoint, True, True
        print(f"DynamoDB: AWS's DynamoDB Local (in memory), SQS and EventBridge: the embedded "
              f"emulator, at {substrate.endpoint}", flush=True)
        try:
            return _run_runtime(args, external, policies)
        finally:
            substrate.stop()
    return _run_runtime(args, external, policies)


def _run_runtime(args: argparse.Namespace, external: Any, policies: Any) -> int:
    """Start the runtime ``args`` describe and run it until a signal; the exit status."""
    from botocore.exceptions import BotoCoreError, ClientError

    from leasehold.local.keeper import StateInUse
    from leasehold.local.options import RuntimeOptions
    from leasehold.local.runtime import PortBusy, Runtime

    options = RuntimeOptions(
        host=args.host, port=args.port, allowed_hosts=tuple(args.allow_host),
        workers=args.workers, concurrency=args.concurrency,
        batch_size=args.batch_size, tasks=_split(args.tasks), pools=_split(args.pools),
        endpoint=args.endpoint, lease_seconds=args.lease_seconds,
        sweep_seconds=args.sweep_seconds, tick_seconds=args.tick_seconds,
        idle_sweep_seconds=args.idle_sweep_seconds, idle_tick_seconds=args.idle_tick_seconds,
        heartbeat_seconds=args.heartbeat_seconds, drain_seconds=args.drain_seconds,
        leader_lease_seconds=args.leader_lease_seconds,
        event_log=args.event_log or str(Path(args.state_dir) / "events.jsonl"),
        state_dir=None if args.in_memory else args.state_dir, fresh=args.fresh,
        save_seconds=args.save_seconds, provision=args.provision, reload=args.reload,
        external=external, external_policies=policies, tenant_rate=args.tenant_rate,
        tenant_burst=args.tenant_burst, tenant_max_live=args.tenant_max_live,
        max_backlog=args.max_backlog)
    if args.lookahead_seconds is not None:
        options.lookahead_seconds = args.lookahead_seconds
    runtime = Runtime(options)
    with runtime.signals() as signalled:  # a Ctrl-C during the start stops it once started
        try:
            runtime.start()
        except (PortBusy, StateInUse) as exc:
            print(f"leasehold dev: {exc}", file=sys.stderr)
            return 2
        except (LeaseholdError, RuntimeError) as exc:
            print(f"leasehold dev: could not start: {exc}", file=sys.stderr)
            runtime.stop()
            return 1
        except (BotoCoreError, ClientError) as exc:  # e.g. --endpoint names nothing listening
            print(f"leasehold dev: could not start: {aws_problem(exc, args.endpoint)}",
                  file=sys.stderr)
            runtime.stop()
            return 1
        runtime.run_until_signalled(signalled)
    # Stopped and saved: the process only exits now. Python's last collection would walk the
    # whole heap (the emulator's tables, every parsed service model) for nothing, about a
    # second and a half of every stop; frozen objects are left to the exit.
    gc.freeze()
    return 0


def _watch_parent(parent: int, stop: Any) -> None:
    # A worker started by `leasehold dev` must not outlive it (it may be SIGKILLed).
    while os.getppid() == parent:
        time.sleep(0.5)
    stop()


def run_worker(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from leasehold.aws import secrets
    from leasehold.aws.provision import missing_credentials
    from leasehold.compose import compose
    from leasehold.polling.poller import PollerOptions, PollingWorker
    from leasehold.polling.task_protection import TaskProtection
    from leasehold.settings import Settings
    from leasehold.tracing.setup import configure as configure_tracing

    overrides: dict[str, Any] = {}
    if args.tasks:
        overrides["task_modules"] = _split(args.tasks)
    try:
        # The pool's secrets (PoolConfig.secrets) into the environment before the task
        # modules are imported: task code reads them as any variable.
        secrets.apply()
    except LeaseholdError as exc:
        print(f"leasehold worker: {exc}", file=sys.stderr)
        return 1
    # compose, not a bare app: the worker's transitions must reach the store observers (job
    # state events, workflow progress, tenant counters) as the API's and the ticker's do.
    app = compose(Settings.from_env(**overrides))
    configure_tracing("leasehold-worker")  # when OTEL_* asks for it
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
    credentials = missing_credentials()
    if credentials is not None:
        print(f"leasehold worker: no {credentials}", file=sys.stderr)
        return 1
    try:
        poller.run(drain_seconds=args.drain_seconds)
    except (BotoCoreError, ClientError) as exc:
        logging.getLogger(__name__).debug("the worker stopped", exc_info=True)  # -v shows it
        print(f"leasehold worker: {aws_problem(exc, app.settings.endpoint_url)}",
              file=sys.stderr)
        return 1
    return 0


def aws_problem(exc: Exception, endpoint: str | None) -> str:
    """One line for an AWS error that stops a start: what failed and what to check."""
    from botocore.exceptions import ClientError, EndpointConnectionError

    where = endpoint or "AWS (no AWS_ENDPOINT_URL: the real one)"
    if isinstance(exc, EndpointConnectionError):
        return (f"cannot reach {where} ({exc}); is the emulator running, and is "
                "--endpoint (or AWS_ENDPOINT_URL) right?")
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return (f"{where} refused {exc.operation_name}: {error.get('Code')}: "
                f"{error.get('Message')} (are the tables and queues deployed, and may these "
                "credentials use them? run with -v for the traceback)")
    return f"AWS call failed against {where}: {exc} (run with -v for the traceback)"
