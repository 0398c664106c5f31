"""``leasehold dev --regions a,b,c``: several cells (Regions) on one machine, for a drill.

Each Region is a whole ``leasehold dev`` of its own (a child process): its own embedded
emulator, so its own tables and queues, its own state directory (``<state-dir>/<region>``),
API port (``--port``, the next one, ...), console, workers, sweeper and ticker. The control
table (``leasehold.cells.control``: tenants' homes, Region leases) lives on one more emulator
this process starts, which every cell reaches at ``LEASEHOLD_CONTROL_ENDPOINT``.

``leasehold regions isolate a`` takes Region ``a`` off while it runs: it writes the Region's
isolation file (``LEASEHOLD_ISOLATE_FILE``, :mod:`leasehold.aws.isolation`), and every AWS
call of that cell (its API process and its workers, control table included) fails or hangs,
and its API answers 503 (:func:`leasehold.local.gateway.isolating`). ``leasehold regions
reconnect a`` brings it back. Where everything is, is written to
``<state-dir>/regions.json`` (:mod:`leasehold.cells.drill`) for those commands (and
``regions show``, ``failover`` and ``failback``, which find the local control table there).

The control table is kept in memory: each start begins with no homes (a tenant's first
submission homes it where it lands), while each cell keeps its own jobs in its directory.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from leasehold.aws.isolation import ENV as ISOLATE_ENV
from leasehold.aws.isolation import IsolationSwitch
from leasehold.cells.drill import CONTROL_TABLE, LAYOUT, Layout, RegionsUnavailable, layout
from leasehold.errors import LeaseholdError

ISOLATED = "isolated"


# -- the runtime --------------------------------------------------------------------------


def free_ports(host: str, count: int) -> list[int]:
    sockets = [socket.create_server((host, 0)) for _ in range(count)]
    try:
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class _Cell:
    region: str
    url: str
    process: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)


class RegionsRuntime:
    """Starts one ``leasehold dev`` per Region and the control table's emulator."""

    def __init__(self, regions: Sequence[str], *, host: str, port: int, state_dir: str,
                 dev_args: Sequence[str], out: TextIO = sys.stdout,
                 start_timeout: float = 120.0) -> None:
        if len(set(regions)) != len(regions) or len(regions) < 2:
            raise LeaseholdError(f"--regions names two or more different Regions, not "
                                 f"{','.join(regions)!r}")
        self.regions = list(regions)
        self.host, self.port = host, port
        self.directory = Path(state_dir).resolve()
        self.dev_args = list(dev_args)
        self.out = out
        self.start_timeout = start_timeout
        self.cells: list[_Cell] = []
        self.control: Any = None
        self.stopping = threading.Event()

    def start(self) -> None:
        from leasehold.cells.control import create_control_table
        from leasehold.local import emulator

        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            running = layout(self.directory)
        except RegionsUnavailable:
            pass
        else:
            raise LeaseholdError(f"another `leasehold dev --regions` (pid {running.pid}) runs "
                                 f"on {self.directory}; stop it or pass --state-dir")
        for name, value in (("AWS_ACCESS_KEY_ID", "leasehold-local"),
                            ("AWS_SECRET_ACCESS_KEY", "leasehold-local"),
                            ("AWS_REGION", "us-east-1")):
            os.environ.setdefault(name, value)
        self.control = emulator.start(self.host)
        create_control_table(_dynamodb(self.control.endpoint), CONTROL_TABLE)
        ports = free_ports(self.host, len(self.regions)) if self.port == 0 else \
            [self.port + i for i in range(len(self.regions))]
        switches = {}
        for region, port in zip(self.regions, ports, strict=True):
            switch = IsolationSwitch(self.directory / region / ISOLATED)
            switch.clear()  # a drill of an earlier run does not carry over
            switches[region] = str(switch.path)
            self.cells.append(self._spawn(region, port, switch))
        for cell in self.cells:
            self._wait_ready(cell)
        Layout(pid=os.getpid(), control_endpoint=self.control.endpoint,
               control_table=CONTROL_TABLE, urls={c.region: c.url for c in self.cells},
               switches=switches).write(self.directory)
        self._banner()

    def _spawn(self, region: str, port: int, switch: IsolationSwitch) -> _Cell:
        url = f"http://{self.host}:{port}"
        env = {**os.environ, "LEASEHOLD_CELL_REGION": region,
               "LEASEHOLD_CONTROL_TABLE": CONTROL_TABLE,
               "LEASEHOLD_CONTROL_ENDPOINT": self.control.endpoint,
               "LEASEHOLD_CELL_URL": url, ISOLATE_ENV: str(switch.path),
               "PYTHONUNBUFFERED": "1"}
        process = subprocess.Popen(
            [sys.executable, "-m", "leasehold.cli", "dev", "--host", self.host,
             "--port", str(port), "--state-dir", str(self.directory / region),
             *self.dev_args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return _Cell(region, url, process)

    def _wait_ready(self, cell: _Cell) -> None:
        assert cell.process.stdout is not None
        deadline = time.monotonic() + self.start_timeout
        for line in cell.process.stdout:
            cell.output.append(line)
            if line.startswith("Press Ctrl-C") or time.monotonic() > deadline:
                break
        if not any(line.startswith("Press Ctrl-C") for line in cell.output):
            raise LeaseholdError(f"Region {cell.region}'s cell did not start:\n"
                                 + "".join(cell.output[-20:]))
        threading.Thread(target=self._relay, args=(cell,), daemon=True,
                         name=f"cell-{cell.region}").start()

    def _relay(self, cell: _Cell) -> None:
        """The cell's own output, each line marked with its Region."""
        assert cell.process.stdout is not None
        for line in cell.process.stdout:
            print(f"[{cell.region}] {line}", end="", file=self.out, flush=True)

    def _banner(self) -> None:
        lines = ["Leasehold is running in Regions " + ", ".join(self.regions) + ".",
                 *(f"  {c.region}: API and console {c.url}   "
                   f"(LEASEHOLD_URL={c.url})" for c in self.cells),
                 f"  control:   table {CONTROL_TABLE} at {self.control.endpoint} (in memory; "
                 "every tenant is homed by its first submission)",
                 f"  drill:     leasehold regions isolate {self.regions[0]}; leasehold regions "
                 f"failover --from {self.regions[0]} --to {self.regions[1]}; leasehold "
                 f"regions reconnect {self.regions[0]}; leasehold regions failback "
                 f"--region {self.regions[0]}",
                 f"  state:     {self.directory}/<region>  (regions.json says where each is)",
                 "Press Ctrl-C to stop (in-flight jobs finish first)."]
        for cell in self.cells:  # each cell's own banner, for its ports and workers
            print("".join(f"[{cell.region}] {line}" for line in cell.output), end="",
                  file=self.out)
        print("\n".join(lines), file=self.out, flush=True)

    def run_until_signalled(self, signalled: threading.Event) -> int:
        """Run until ``signalled``, or until a cell stops by itself (then stop the rest)."""
        status = 0
        try:
            while not signalled.wait(0.5):
                ended = [c for c in self.cells if c.process.poll() is not None]
                if ended:
                    status = 1
                    print(f"Region {ended[0].region}'s cell stopped (status "
                          f"{ended[0].process.returncode}); stopping the others",
                          file=self.out, flush=True)
                    break
        finally:
            self.stop()
        return status

    def stop(self) -> None:
        if self.stopping.is_set():
            return
        self.stopping.set()
        (self.directory / LAYOUT).unlink(missing_ok=True)
        for cell in self.cells:
            IsolationSwitch(self.directory / cell.region / ISOLATED).clear()  # drain normally
            if cell.process.poll() is None:
                cell.process.send_signal(signal.SIGTERM)
        for cell in self.cells:
            try:
                cell.process.wait(60)
            except subprocess.TimeoutExpired:
                cell.process.kill()
                cell.process.wait()
        if self.control is not None:
            self.control.stop()
        print("Stopped every Region.", file=self.out, flush=True)


def _dynamodb(endpoint: str) -> Any:
    import boto3

    return boto3.session.Session().client("dynamodb", endpoint_url=endpoint,
                                          region_name=os.environ.get("AWS_REGION",
                                                                     "us-east-1"))


#: The options each cell of ``--regions`` is started with as given (the rest are per cell).
_CELL_OPTIONS = ("workers", "concurrency", "batch_size", "tasks", "pools", "save_seconds",
                 "lease_seconds", "sweep_seconds", "tick_seconds", "idle_sweep_seconds",
                 "idle_tick_seconds", "heartbeat_seconds", "drain_seconds",
                 "leader_lease_seconds", "lookahead_seconds", "tenant_rate", "tenant_burst",
                 "tenant_max_live", "max_backlog", "otlp")
_CELL_FLAGS = ("fresh", "in_memory", "reload")


def run(args: argparse.Namespace) -> int:
    """``leasehold dev --regions a,b,c`` (its parsed ``args``): one runtime per Region, until a
    signal; the exit status."""
    from leasehold.local.runtime import Runtime

    for given, name in ((args.endpoint, "--endpoint"), (args.allow_host, "--allow-host"),
                        (args.event_log, "--event-log")):
        if given:
            print(f"leasehold dev: --regions runs each cell on its own emulator: drop {name}",
                  file=sys.stderr)
            return 2
    dev_args = [item for name in _CELL_OPTIONS if (value := getattr(args, name)) is not None
                for item in (f"--{name.replace('_', '-')}", str(value))]
    dev_args += [f"--{name.replace('_', '-')}" for name in _CELL_FLAGS if getattr(args, name)]
    dev_args += [f"--external={spec}" for spec in args.external]
    # --dynamodb local: each cell on a DynamoDB Local of its own (the control table stays on
    # its emulator, as the MRSC table is not the cells' substrate).
    dev_args += ["--dynamodb", args.dynamodb]
    try:
        names = [name.strip() for name in args.regions.split(",") if name.strip()]
        regions = RegionsRuntime(names, host=args.host, port=args.port,
                                 state_dir=args.state_dir, dev_args=dev_args)
    except LeaseholdError as exc:
        print(f"leasehold dev: {exc}", file=sys.stderr)
        return 2
    with Runtime.signals() as signalled:
        try:
            regions.start()
        except (LeaseholdError, RuntimeError, OSError) as exc:
            print(f"leasehold dev: could not start: {exc}", file=sys.stderr)
            regions.stop()
            return 1
        return regions.run_until_signalled(signalled)
