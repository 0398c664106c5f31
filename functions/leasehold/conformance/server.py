"""The runtime the kit drives: ``leasehold dev`` in a subprocess, on a free port, with the
conformance tasks external, and a small HTTP client for it."""

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

POOL = "conf"
#: What a conforming worker runs (docs/protocol.md), and a task it must never be given.
TASKS = ("conformance.echo", "conformance.fail", "conformance.sleep")
UNASKED = "conformance.unasked"
TERMINAL = frozenset({"SUCCEEDED", "DEAD", "CANCELLED"})
TENANT = "conf"
#: Short leases and sweeps: a lost worker's job comes back in seconds.
ARGS = ("--workers", "0", "--tasks", "", "--external", f"{POOL}:{','.join((*TASKS, UNASKED))}",
        "--lease-seconds", "2", "--sweep-seconds", "0.5", "--tick-seconds", "0.5",
        "--drain-seconds", "10", "--in-memory")


class CaseFailed(AssertionError):
    """A case's expectation did not hold (its message says which)."""


def check(condition: object, message: str) -> None:
    if not condition:
        raise CaseFailed(message)


@dataclass
class Reply:
    status: int
    body: Any


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str = ""
    output: list[str] = field(default_factory=list)

    def call(self, method: str, path: str, body: Any = None, *,
             tenant: str = TENANT, headers: Mapping[str, str] | None = None) -> Reply:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"X-Leasehold-Tenant": tenant, "Content-Type": "application/json",
                     **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read()
        return Reply(status, json.loads(text) if text else None)

    def submit(self, task: str, payload: Any, tenant: str = TENANT,
               headers: Mapping[str, str] | None = None, **extra: Any) -> str:
        reply = self.call("POST", "/jobs", {"task": task, "payload": payload, **extra},
                          tenant=tenant, headers=headers)
        check(reply.status in (200, 201), f"submitting {task}: {reply.status} {reply.body}")
        return str(reply.body["job_id"])

    def job(self, job_id: str, tenant: str = TENANT) -> dict[str, Any]:
        reply = self.call("GET", f"/jobs/{job_id}", tenant=tenant)
        check(reply.status == 200, f"reading {job_id}: {reply.status} {reply.body}")
        job: dict[str, Any] = reply.body
        return job

    def wait_for(self, job_ids: list[str], *, tenant: str = TENANT, timeout: float = 30,
                 states: frozenset[str] = TERMINAL) -> dict[str, dict[str, Any]]:
        """The jobs once each is in one of ``states``; fails after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        done: dict[str, dict[str, Any]] = {}
        while True:
            for job_id in [j for j in job_ids if j not in done]:
                job = self.job(job_id, tenant)
                if job["state"] in states:
                    done[job_id] = job
            if len(done) == len(job_ids):
                return done
            if time.monotonic() > deadline:
                left = {j: self.job(j, tenant)["state"] for j in job_ids if j not in done}
                raise CaseFailed(f"after {timeout:g} s, jobs not in {sorted(states)}: {left}")
            time.sleep(0.2)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def start(*extra: str) -> Server:
    """A ``leasehold dev`` of this installation with the conformance tasks external; its
    state in a fresh temporary directory."""
    state = tempfile.mkdtemp(prefix="leasehold-conformance-")
    process = subprocess.Popen(
        [sys.executable, "-m", "leasehold.cli", "dev", "--port", "0", *ARGS, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=state,
        env={**os.environ, "LEASEHOLD_SKEW_GRACE_SECONDS": "1",
             "LEASEHOLD_STATE_DIR": state})
    server = Server(process)
    assert process.stdout is not None
    deadline = time.monotonic() + 60
    for line in process.stdout:
        server.output.append(line)
        if line.strip().startswith("API:"):
            server.url = line.split()[1]
        if line.startswith("Press Ctrl-C") or time.monotonic() > deadline:
            break
    if not server.url:
        process.kill()
        raise RuntimeError("leasehold dev did not start:\n" + "".join(server.output[-40:]))

    def drain() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            server.output.append(line)

    threading.Thread(target=drain, daemon=True).start()
    return server


__all__ = ["POOL", "TASKS", "TENANT", "TERMINAL", "UNASKED", "CaseFailed", "Reply", "Server",
           "check", "start"]
