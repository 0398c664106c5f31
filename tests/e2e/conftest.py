"""Start the real ``leasehold dev`` as a subprocess on a free port and drive it over HTTP."""

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[2]
TERMINAL = {"SUCCEEDED", "DEAD", "CANCELLED"}
#: Short leases and sweeps so crash recovery takes seconds, not minutes.
FAST = ["--lease-seconds", "2", "--sweep-seconds", "0.5", "--heartbeat-seconds", "0.5",
        "--tick-seconds", "0.5", "--drain-seconds", "10"]


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any


@dataclass
class Runtime:
    process: subprocess.Popen[str]
    url: str = ""
    output: list[str] = field(default_factory=list)

    def call(self, method: str, path: str, body: Any = None, *, tenant: str = "default",
             raw: bytes | None = None) -> Reply:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        headers = {"X-Leasehold-Tenant": tenant, "Content-Type": "application/json"}
        request = urllib.request.Request(self.url + path, data=data, headers=headers,
                                         method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, got, text = response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            status, got, text = exc.code, dict(exc.headers), exc.read()
        return Reply(status, got, json.loads(text) if text else None)

    def submit(self, body: dict[str, Any], tenant: str = "default") -> dict[str, Any]:
        reply = self.call("POST", "/jobs", body, tenant=tenant)
        assert reply.status in (200, 201), reply.body
        job: dict[str, Any] = reply.body
        return job

    def job(self, job_id: str, tenant: str = "default") -> dict[str, Any]:
        reply = self.call("GET", f"/jobs/{job_id}", tenant=tenant)
        assert reply.status == 200, reply.body
        job: dict[str, Any] = reply.body
        return job

    def wait_for(self, job_ids: list[str], states: set[str] = TERMINAL, *, tenant: str = "default",
                 timeout: float = 60) -> dict[str, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        done: dict[str, dict[str, Any]] = {}
        while True:
            pending = [j for j in job_ids if j not in done]
            if len(pending) > 20:  # many: one listing call beats a call per job
                for job in self.call("GET", "/jobs?limit=200", tenant=tenant).body["jobs"]:
                    if job["job_id"] in pending and job["state"] in states:
                        done[job["job_id"]] = job
            else:
                for job_id in pending:
                    job = self.job(job_id, tenant)
                    if job["state"] in states:
                        done[job_id] = job
            if len(done) == len(job_ids):
                return done
            if time.monotonic() > deadline:
                pending = {j: self.job(j, tenant)["state"] for j in job_ids if j not in done}
                raise AssertionError(f"jobs did not reach {states}: {pending}")
            time.sleep(0.3 if len(pending) <= 20 else 1.0)  # spare the emulator's CPU

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # what Ctrl-C sends
            try:
                self.process.wait(40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def start_runtime(*args: str, env: dict[str, str] | None = None) -> Runtime:
    # Its state and event log go to a fresh temporary directory, never the repository's
    # .leasehold/ (which is the developer's own `leasehold dev` state).
    state = tempfile.mkdtemp(prefix="leasehold-e2e-")
    process = subprocess.Popen(
        [sys.executable, "-m", "leasehold.cli", "dev", "--port", "0", *FAST, *args],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "LEASEHOLD_SKEW_GRACE_SECONDS": "1", "LEASEHOLD_STATE_DIR": state,
             **(env or {})})
    runtime = Runtime(process)
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    for line in process.stdout:
        runtime.output.append(line)
        if line.strip().startswith("API:"):
            runtime.url = line.split()[1]
        if line.startswith("Press Ctrl-C") or time.monotonic() > deadline:
            break
    if not runtime.url:
        process.kill()
        raise AssertionError("leasehold dev did not start:\n" + "".join(runtime.output))

    def drain() -> None:  # keep the pipe empty; keep what it said for assertions
        assert process.stdout is not None
        for line in process.stdout:
            runtime.output.append(line)

    threading.Thread(target=drain, daemon=True).start()
    return runtime


StartRuntime = Callable[..., Runtime]


@pytest.fixture(scope="module")
def runtime() -> Iterator[Runtime]:
    """One runtime per test module: starting one costs a few seconds."""
    # Batches of one: a killed worker then holds only the jobs it was running (messages it
    # received but had not started would wait out their 30 s visibility timeout).
    started = start_runtime("--workers", "2", "--concurrency", "4", "--batch-size", "1")
    yield started
    code = started.stop()
    assert code == 0, "".join(started.output[-30:])
    assert any("Stopped." in line for line in started.output)
