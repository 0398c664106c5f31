"""``leasehold dev``: the whole scheduler on one machine.

It starts, in order: the HTTP gateway's socket (so a busy port fails before anything else
starts), the embedded AWS emulator (unless given an endpoint), the tables and queues from
:mod:`leasehold.aws.definitions`, N worker processes (restarted if they die), a sweeper thread,
and a ticker thread that ticks only while it holds the DynamoDB leader lease, so several
runtimes (or ECS tickers) on the same tables never tick together and a standby takes over
within one lease period when the leader dies. Job state events go to a local JSON-lines log
that ``leasehold events tail`` follows. Ctrl-C stops accepting requests, lets the workers
drain, and stops the emulator last.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from leasehold.api.app import handle
from leasehold.api.context import ApiConfig
from leasehold.aws import provision
from leasehold.compose import compose
from leasehold.events.publishing import FILE_PREFIX, FileSink, runtime_started
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.local import emulator, hints, relay, reload, state
from leasehold.local.dev_targets import DEV_ALLOW, dev_targets, dev_targets_role
from leasehold.local.gateway import Gateway, isolating, wakes_background_loops
from leasehold.local.keeper import StateKeeper
from leasehold.local.leadership import AnnouncedLease
from leasehold.local.options import RuntimeOptions
from leasehold.settings import Settings
from leasehold.time import ticker

log = logging.getLogger(__name__)


class PortBusy(RuntimeError):
    """The API port is taken (another ``leasehold dev`` is probably running)."""


@dataclass
class _Child:
    pool: str
    process: subprocess.Popen[bytes]
    restarts: int = 0


class Runtime:
    def __init__(self, options: RuntimeOptions, out: TextIO = sys.stdout) -> None:
        self.options = options
        self.out = out
        self.stopping = threading.Event()
        self.gateway: Gateway | None = None
        self.emulator: emulator.Emulator | None = None
        self.children: list[_Child] = []
        self.threads: list[threading.Thread] = []
        self.app: Leasehold | None = None
        self.lease: AnnouncedLease | None = None
        self.loaded = 0
        self.keeper: StateKeeper | None = None
        self.relay: relay.LocalRelay | None = None
        #: Set when the API accepts a write: the ticker and the sweeper look at once.
        self.tick_wake = threading.Event()
        self.sweep_wake = threading.Event()

    # -- start ----------------------------------------------------------------------------

    def start(self) -> None:
        opts = self.options
        directory = self._state()
        if directory is not None:
            # First: a second runtime on this directory stops before it binds or starts
            # anything (StateInUse names the first one's PID).
            self.keeper = StateKeeper(directory, every=opts.save_seconds, out=self.out)
            self.keeper.lock()
        try:
            # A cell of `leasehold dev --regions`: refused while its Region is isolated.
            self.gateway = Gateway(opts.host, opts.port, isolating(self._answer),
                                   opts.allowed_hosts)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortBusy(
                    f"port {opts.port} on {opts.host} is already in use; is another "
                    f"`leasehold dev` running? Stop it or pass --port.") from None
            raise
        endpoint = opts.endpoint
        if endpoint is None:
            # Credentials are required by boto3 but never checked by the emulator.
            os.environ.setdefault("AWS_ACCESS_KEY_ID", "leasehold-local")
            os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "leasehold-local")
            self.emulator = emulator.start(opts.host, allowed_hosts=opts.allowed_hosts)
            endpoint = self.emulator.endpoint
        os.environ.setdefault("AWS_REGION", os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
        os.environ.update(opts.env)
        # An absolute path: the workers and `leasehold events tail` may run elsewhere.
        event_bus = os.environ.get("LEASEHOLD_EVENT_BUS") or \
            FILE_PREFIX + str(Path(opts.event_log).resolve())
        # Every state change by default: a laptop's event log costs nothing, and its reader
        # (`leasehold events tail`) is there to watch jobs move. LEASEHOLD_PUBLISH overrides.
        publish = os.environ.get("LEASEHOLD_PUBLISH") or "all"
        # Events from the jobs table's change stream, as the deployed stack publishes them
        # (the relay thread below; the workers, which inherit this, publish nothing).
        os.environ.setdefault("LEASEHOLD_EVENTS_FROM", "stream")
        # HTTP targets may reach loopback here (a test server on this machine), and no other
        # address a deployment refuses; the workers inherit it. LEASEHOLD_TARGETS adds the
        # rest of a deployment's settings (http_hosts, http_secrets, aws_targets, ...).
        # With no Python pool (every pool external) targets are off, and nothing is added.
        if any(pool not in opts.external for pool in opts.pools) or \
                os.environ.get("LEASEHOLD_TARGETS"):
            os.environ["LEASEHOLD_TARGETS"] = dev_targets(os.environ.get("LEASEHOLD_TARGETS"))
        settings = Settings.from_env(
            **opts.limits(), endpoint_url=endpoint, task_modules=opts.tasks,
            # An external pool has queues and no Python worker (its workers lease over HTTP).
            pools=(*opts.pools, *(p for p in opts.external if p not in opts.pools)),
            external_tasks=opts.external, external_policies=opts.external_policies,
            lease_seconds=opts.lease_seconds, event_bus=event_bus, publish=publish)
        # LEASEHOLD_PROVISION: the older, undocumented spelling of --provision.
        provisioning = bool(self.emulator is not None or opts.provision
                            or os.environ.get("LEASEHOLD_PROVISION"))
        if self.emulator is not None and not settings.targets_role_arn:
            # Outbound calls get credentials of their own here, as deployed; the workers
            # inherit the role (Settings.to_env). Another endpoint: LEASEHOLD_TARGETS_ROLE_ARN.
            settings = settings.with_(targets_role_arn=dev_targets_role(settings))
        self.app = compose(settings)
        if provisioning:
            credentials = provision.missing_credentials()
            if credentials is not None:
                raise provision.NotProvisioned(f"no {credentials}")
            provision.create_all(self.app.clients, settings)
        else:
            provision.check_ready(self.app.clients, settings, endpoint=endpoint)
        self.loaded = self._load_state(event_bus)
        if event_bus.startswith(FILE_PREFIX):
            # A line that says a new run began: `events tail` shows what came before it as
            # an earlier run's, never as live.
            FileSink(event_bus[len(FILE_PREFIX):]).publish(
                runtime_started(self.app.now(), os.getpid()))
        if settings.events_from == "stream":
            self.relay = relay.LocalRelay(
                self.app, self._state() or Path(opts.state_dir or ".leasehold"), self._thread)
        self.api_config = ApiConfig.from_env({**os.environ, "LEASEHOLD_TRUST_TENANT_HEADER": "1"})
        for pool in opts.pools:
            for _ in range(opts.workers):
                self.children.append(_Child(pool, self._spawn(pool)))
        self._thread(self._supervise, "supervisor")
        self._thread(self._sweep, "sweeper")
        if self.keeper is not None and opts.save_seconds > 0:
            self._thread(functools.partial(self.keeper.run, self.stopping), "autosave")
        self.lease = AnnouncedLease(self.app, lease_seconds=opts.leader_lease_seconds,
                                    out=self.out)
        self._thread(self._tick, "ticker")
        if opts.reload:
            self._thread(self._reload, "reload")
        self._thread(self.gateway.serve_forever, "gateway")
        self._banner(settings)

    def _state(self) -> Path | None:
        """Where the tables are kept, or None: in memory (or not ours: another endpoint)."""
        if self.options.endpoint is not None or self.options.state_dir is None:
            return None
        return Path(self.options.state_dir).resolve()

    def _load_state(self, event_bus: str) -> int:
        if self.options.fresh:
            logs = [Path(event_bus[len(FILE_PREFIX):])] if event_bus.startswith(FILE_PREFIX) \
                else []
            kept = [self.keeper.directory / state.STATE_FILE] if self.keeper else []
            for path in [*logs, *kept]:
                if (moved := state.move_aside(path)) is not None:
                    print(f"--fresh: moved {path} aside to {moved.name}", file=self.out,
                          flush=True)
        if self.keeper is None:
            return 0
        assert self.app is not None
        return self.keeper.load(self.app)

    def _thread(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _answer(self, event: dict[str, Any]) -> dict[str, Any]:
        assert self.app is not None
        response = handle(self.app, event, None, self.api_config)
        if wakes_background_loops(str(event.get("httpMethod")), str(event.get("path"))) and \
                int(response.get("statusCode", 500)) < 400:
            # A new schedule, a cancel, ... : the backed-off loops look now.
            self.tick_wake.set()
            self.sweep_wake.set()
        return response

    def _spawn(self, pool: str) -> subprocess.Popen[bytes]:
        assert self.app is not None
        opts = self.options
        env = {**os.environ, **self.app.settings.to_env(), "PYTHONUNBUFFERED": "1"}
        if not self.app.settings.code_version:
            # The tasks' source as it is now: a worker restarted by --reload runs the
            # edited code, and its jobs' attempts record the new version.
            env["LEASEHOLD_CODE_VERSION"] = reload.source_version(opts.tasks)
        return subprocess.Popen(
            [sys.executable, "-m", "leasehold.cli", "worker", "--pool", pool,
             "--concurrency", str(opts.concurrency), "--batch-size", str(opts.batch_size),
             "--heartbeat-seconds", str(opts.heartbeat_seconds),
             "--drain-seconds", str(opts.drain_seconds), "--parent", str(os.getpid())],
            env=env)

    def _banner(self, settings: Settings) -> None:
        assert self.gateway is not None
        where = "embedded moto server" if self.emulator else "external endpoint"
        events = settings.event_bus or ""
        external = settings.external_tasks
        external_line = "; ".join(f"pool {pool}: {', '.join(names)}"
                                  for pool, names in external.items())
        if events.startswith(FILE_PREFIX):
            path = events[len(FILE_PREFIX):]
            events = f"{path}   (leasehold events tail -f --log {path})"
        lines = [
            "Leasehold is running.",
            f"  API:       {self.gateway.url}   (OpenAPI at {self.gateway.url}/openapi.json)",
            f"  console:   {self.gateway.url}/",
            f"  use it:    {hints.export_line(self.gateway.url)}   (in another shell: the "
            "CLI and leasehold.client read it)",
            f"  CLI:       {hints.cli_line()}",
            f"  answers:   Host {self.gateway.own.names()} only, and no other site's page "
            "(--allow-host adds a name)",
            f"  AWS:       {settings.endpoint_url} ({where})",
            f"  workers:   {len(self.children)} process(es) x {self.options.concurrency} "
            f"thread(s), pools {', '.join(p for p in settings.pools if p not in external)}: "
            + " ".join(str(c.process.pid) for c in self.children),
            *([f"  external:  {external_line}   (workers in any language: POST "
               "/workers/lease, docs/protocol.md)"] if external else []),
            f"  tasks:     {', '.join(settings.task_modules)} -> "
            + ", ".join(self.app.registry.names() if self.app else []),
            f"  sweeper:   every {self.options.sweep_seconds:g}s; ticker every "
            f"{self.options.tick_seconds:g}s while it holds the leader lease "
            f"({self.options.leader_lease_seconds:g}s); both slow down while idle (to "
            f"{max(self._idle_sweep() or 0, self.options.sweep_seconds):g}s / "
            f"{self.options.idle_tick_seconds or self.options.tick_seconds:g}s) until the API "
            f"takes a write; job leases {settings.lease_seconds:g}s",
            (f"  targets:   on pool {settings.targets_runner()}; HTTP targets may reach "
             f"loopback ({', '.join(DEV_ALLOW)}) here, and only here: a deployment refuses it; "
             "sigv4 and AWS targets run as "
             f"{settings.targets_role_arn or 'nothing (no targets role: refused)'}"
             if settings.targets_runner() else
             "  targets:   off (every pool is external; targets run on a Python pool)"),
            f"  tenants:   {settings.tenant_rate:g} submissions/s (burst "
            f"{settings.tenant_burst:g}), "
            + (f"{settings.tenant_max_live} live jobs" if settings.tenant_max_live
               else "no live-job cap")
            + " each, for the API and the workers alike (--tenant-*; a tenant's plan "
            "overrides them)",
            f"  events:    {events}",
            f"  state:     {self._state_line()}",
            "Press Ctrl-C to stop (in-flight jobs finish first).",
        ]
        print("\n".join(lines), file=self.out, flush=True)

    def _state_line(self) -> str:
        directory = self._state()
        if directory is not None:
            every = self.options.save_seconds
            kept = (f"{directory / state.STATE_FILE}: saved "
                    + (f"within {every:g}s of a change and " if every > 0 else "")
                    + "when you stop, loaded at start")
            loaded = f"{self.loaded} item(s) loaded" if self.loaded else "started empty"
            return f"{kept} ({loaded}; --fresh starts empty)"
        if self.emulator is not None:
            return "IN MEMORY ONLY (--in-memory): every job, schedule and dead letter is " \
                   "lost when you stop"
        return f"kept by {self.options.endpoint}"

    # -- background loops -----------------------------------------------------------------

    def _supervise(self) -> None:
        """Restart worker processes that die (as Lambda or ECS would replace them)."""
        while not self.stopping.wait(0.5):
            for child in self.children:
                code = child.process.poll()
                if code is None or self.stopping.is_set():
                    continue
                child.restarts += 1
                child.process = self._spawn(child.pool)
                print(f"worker for pool {child.pool} exited ({code}); restarted as "
                      f"pid {child.process.pid}", file=self.out, flush=True)

    def _reload(self) -> None:
        assert self.app is not None
        reload.watch(self.options.tasks, self.app.registry, self.stopping,
                     self._restart_workers, lambda line: print(line, file=self.out, flush=True))

    def _restart_workers(self) -> int:
        """Ask every worker to stop (they drain); the supervisor starts them again."""
        for child in self.children:
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        return len(self.children)

    def _sweep(self) -> None:
        # No leader lease here: sweeps are fenced transitions, so two runtimes sweeping the
        # same tables only repeat each other's reads.
        assert self.app is not None
        sweeper.run(self.app, self.stopping, interval_seconds=self.options.sweep_seconds,
                    idle_interval_seconds=self._idle_sweep(), wake=self.sweep_wake)

    def _idle_sweep(self) -> float | None:
        """The sweeper's slowest pace: a lost worker's job waits at most half a lease more
        (and a lost hand-off half a hand-off period more) than at the base pace."""
        assert self.app is not None
        settings = self.app.settings
        if not self.options.idle_sweep_seconds:
            return None
        return min(self.options.idle_sweep_seconds, settings.lease_seconds / 2,
                   settings.handoff_seconds / 2)

    def _tick(self) -> None:
        assert self.app is not None
        ticker.run(self.app, self.stopping, interval_seconds=self.options.tick_seconds,
                   lease=self.lease, lookahead_seconds=self.options.lookahead_seconds,
                   idle_interval_seconds=self.options.idle_tick_seconds or None,
                   wake=self.tick_wake)

    # -- stop -----------------------------------------------------------------------------

    def stop(self) -> None:
        if self.stopping.is_set():
            return
        self.stopping.set()
        self.tick_wake.set()  # the loops sleep on these
        self.sweep_wake.set()
        print("Stopping: draining in-flight jobs...", file=self.out, flush=True)
        if self.gateway is not None:
            if any(t.name == "gateway" for t in self.threads):
                self.gateway.shutdown()  # blocks unless serve_forever is running
            self.gateway.server_close()
        for child in self.children:
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.options.drain_seconds + 5
        for child in self.children:
            try:
                child.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
        if self.relay is not None:
            self.relay.finish()  # the workers are gone: publish what they wrote last
        for thread in self.threads:
            thread.join(2)
        if self.keeper is not None:
            self.keeper.close()  # after the workers drained, so finished jobs are saved finished
        if self.emulator is not None:
            self.emulator.stop()
        print("Stopped.", file=self.out, flush=True)

    @staticmethod
    @contextlib.contextmanager
    def signals() -> Iterator[threading.Event]:
        """SIGINT and SIGTERM set the event this yields while it is open: a Ctrl-C that
        arrives while the runtime starts stops it once started, not with a traceback
        halfway through its start."""
        signalled = threading.Event()

        def on_signal(signum: int, frame: Any) -> None:
            signalled.set()

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield signalled
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def run_until_signalled(self, signalled: threading.Event) -> None:
        """Block until ``signalled`` (from :meth:`signals`) is set, then stop cleanly."""
        try:
            while not signalled.wait(0.5):
                pass
        finally:
            self.stop()
