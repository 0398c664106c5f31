"""CPU time per job of every process a run uses, by role (issue 32's throughput against Celery).

A local substrate (the embedded emulator, DynamoDB Local) runs on the same two cores as the
system it serves, so a run's jobs/s is bound by the CPU all of them spend per job, not by the
system's own. :class:`Meter` reads, from ``/proc``, the CPU seconds of every Python and Java
process (and of this one, where the benchmark's clients run) when it starts and when it is
read, and gives each role's milliseconds per job: the substrate's share against the system's
own is what says where a ratio to Celery comes from. Read it while the processes still run
(a process that has ended is not seen).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

PROC = Path("/proc")
CLIENTS = "benchmark clients (this process)"
#: Roles by a fragment of the command line, first match wins; None: not counted.
ROLES: tuple[tuple[str, str], ...] = (
    ("java", "substrate: DynamoDB Local (Java)"),
    ("leasehold.local.emulator", "substrate: emulator (moto)"),
    ("bench.substrate", "substrate: router"),
    ("leasehold.cli worker", "system: Leasehold workers"),
    ("leasehold.cli dev", "system: leasehold dev (API, relay, sweeper, ticker)"),
    ("celery", "system: Celery workers"),
)


def role(command: str) -> str | None:
    return next((name for fragment, name in ROLES if fragment in command), None)


def processes() -> dict[int, tuple[str, float]]:
    """Every process with a role: its command line and CPU seconds (user + system) so far."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[int, tuple[str, float]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended meanwhile
        if role(command) is not None:
            found[int(entry.name)] = (command, (int(fields[11]) + int(fields[12])) / tick)
    return found


class Meter:
    """The CPU each role spends from now until :meth:`per_job` is called."""

    def __init__(self) -> None:
        self.start = processes()
        self.own = time.process_time()

    def per_job(self, jobs: int) -> dict[str, float]:
        """Milliseconds of CPU per job by role, with the totals of the substrate's roles
        and of the system's."""
        spent: dict[str, float] = {CLIENTS: time.process_time() - self.own}
        for pid, (command, seconds) in processes().items():
            name = role(command)
            assert name is not None
            before = self.start.get(pid)
            spent[name] = spent.get(name, 0.0) + seconds - (before[1] if before else 0.0)
        return totals({name: round(1000 * seconds / jobs, 1)
                       for name, seconds in sorted(spent.items())})


def totals(per_job: Mapping[str, float]) -> dict[str, float]:
    """``per_job`` with the substrate's total and the system's: its own processes and the
    clients (Celery's clients send and poll through the substrate themselves; Leasehold's
    send HTTP requests to its API)."""
    result = dict(per_job)
    result["substrate total"] = round(sum(v for k, v in per_job.items()
                                          if k.startswith("substrate:")), 1)
    result["system total"] = round(sum(v for k, v in per_job.items()
                                       if k.startswith("system:") or k == CLIENTS), 1)
    return result
