"""Starting ``leasehold dev`` (the local runtime) for a benchmark, and talking to it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leasehold.compose import compose
from leasehold.core.jobs import Job
from leasehold.core.registry import load_modules
from leasehold.lifecycle.app import Leasehold
from leasehold.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
TASKS = "bench.tasks"
#: Back-pressure off: the benchmark measures capacity, not the per-tenant limits.
#: One admission item per tenant: a rate this high would otherwise be split over 5,000 items,
#: and every submission would meet a fresh one (a read and a create, not a take).
UNLIMITED = {"LEASEHOLD_TENANT_RATE": "1000000", "LEASEHOLD_TENANT_BURST": "1000000",
             "LEASEHOLD_TENANT_MAX_LIVE": "100000000", "LEASEHOLD_MAX_BACKLOG": "100000000",
             "LEASEHOLD_TENANT_ADMISSION_SHARDS": "1"}


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without Leasehold or endpoint settings, plus fake credentials."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("LEASEHOLD_") and k not in ("AWS_ENDPOINT_URL", "AWS_PROFILE")}
    env.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1",
                "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH"))
                                              if p)})
    env.update(extra)
    return env


@dataclass
class Runtime:
    process: subprocess.Popen[str]
    api: str = ""
    endpoint: str = ""
    output: list[str] = field(default_factory=list)

    def post(self, path: str, body: Any, *, tenant: str) -> dict[str, Any]:
        request = urllib.request.Request(
            self.api + path, data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json", "X-Leasehold-Tenant": tenant})
        with urllib.request.urlopen(request, timeout=60) as response:
            reply: dict[str, Any] = json.loads(response.read())
        return reply

    def app(self) -> Leasehold:
        """A library client of this runtime's emulator (default table and queue names)."""
        return library_app(self.endpoint)


def fake_credentials() -> None:
    """Credentials for the emulator in this process (boto3 needs some; moto checks none)."""
    for name, value in clean_env().items():
        if name.startswith("AWS_"):
            os.environ[name] = value
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        os.environ.pop(name, None)


def library_app(endpoint: str, **overrides: Any) -> Leasehold:
    fake_credentials()
    load_modules((TASKS,))
    settings = Settings(endpoint_url=endpoint, task_modules=(TASKS,), lease_seconds=30.0,
                        **overrides)
    return compose(settings)


@contextmanager
def runtime(*, workers: int, concurrency: int = 4, batch_size: int = 10,
            extra: Sequence[str] = (), env: Mapping[str, str] | None = None,
            endpoint: str | None = None, limited: bool = False) -> Iterator[Runtime]:
    """``leasehold dev`` on a free port with ``workers`` worker processes, stopped on exit
    (``env``: more environment, e.g. the emulator's ``LEASEHOLD_SQS_DELAY_TICK``).

    ``endpoint``: on that AWS endpoint (a bench.substrate), its tables and queues created
    when missing, instead of the embedded emulator. ``limited``: with the per-tenant limits a
    new user gets (the defaults), not :data:`UNLIMITED`.
    """
    if endpoint is not None:
        extra = ("--endpoint", endpoint, "--provision", *extra)
    process = subprocess.Popen(
        [sys.executable, "-m", "leasehold.cli", "dev", "--port", "0",
         "--workers", str(workers), "--concurrency", str(concurrency),
         "--batch-size", str(batch_size), "--tasks", TASKS, "--drain-seconds", "5",
         # A benchmark's jobs and events are not the developer's: kept nowhere, logged aside.
         "--in-memory", "--state-dir", tempfile.mkdtemp(prefix="leasehold-bench-"), *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=clean_env(**({} if limited else UNLIMITED), **(env or {})))
    started = Runtime(process)
    assert process.stdout is not None
    deadline = time.monotonic() + 90
    for line in process.stdout:
        started.output.append(line)
        words = line.split()
        if line.strip().startswith("API:"):
            started.api = words[1]
        if line.strip().startswith("AWS:"):
            started.endpoint = words[1]
        if line.startswith("Press Ctrl-C") or time.monotonic() > deadline:
            break
    if not (started.api and started.endpoint):
        process.kill()
        raise RuntimeError("leasehold dev did not start:\n" + "".join(started.output[-30:]))

    def drain() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            started.output.append(line)

    threading.Thread(target=drain, daemon=True).start()
    try:
        yield started
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def wait_succeeded(app: Leasehold, job_ids: Sequence[str], *, timeout: float,
                   poll: float = 0.25, watch: int = 10) -> list[Job]:
    """Wait until every job is terminal; returns them (read in batches of 100).

    While jobs are running only the ``watch`` newest pending ones are read at each poll (the
    last submitted finish last, near enough): reading every pending row each poll loads the
    emulator the benchmark measures. Once those are done, all pending rows are read again.
    """
    deadline = time.monotonic() + timeout
    pending = list(job_ids)
    done: dict[str, Job] = {}
    while pending:
        newest = pending[-watch:]
        watched = [job for job in app.store.batch_get(newest) if job.state.terminal]
        if len(watched) == len(newest):
            watched = [job for job in app.store.batch_get(pending) if job.state.terminal]
        done.update((job.job_id, job) for job in watched)
        pending = [j for j in pending if j not in done]
        if not pending:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(pending)} of {len(job_ids)} jobs did not finish in "
                               f"{timeout:.0f}s")
        time.sleep(poll)
    return [done[j] for j in job_ids]
