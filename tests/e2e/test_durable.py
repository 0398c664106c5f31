"""Durable execution in the real local runtime over HTTP (issue 23): a step not run again by
the retry, a 4 s sleep that frees the worker, a callback completed over HTTP and one timing
out, 20 children spawned and awaited. One runtime; the jobs run side by side."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from .conftest import ROOT, Runtime, start_runtime

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def runtime() -> Iterator[Runtime]:
    # Batches of one: a worker lists the jobs of the batch it holds, so with one job per
    # batch its list is exactly what it runs.
    started = start_runtime("--workers", "2", "--concurrency", "4", "--batch-size", "1",
                            "--tasks", "examples.tasks,examples.durable_tasks")
    yield started
    assert started.stop() == 0, "".join(started.output[-30:])


def when(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def token_of(runtime: Runtime, job_id: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = runtime.job(job_id)
        if job["state"] == "SLEEPING" and (job.get("progress") or {}).get("callback"):
            return str(job["progress"]["callback"])
        time.sleep(0.2)
    raise AssertionError(f"no callback token: {runtime.job(job_id)}")


def test_durable_jobs_end_to_end(runtime: Runtime) -> None:
    ledger = Path(tempfile.mkdtemp(prefix="leasehold-ledger-")) / "charges"
    order = runtime.submit({"task": "durable-order", "payload": {"ledger": str(ledger)}})
    nap = runtime.submit({"task": "durable-nap", "payload": {"seconds": 4}})
    approved = runtime.submit({"task": "durable-approval", "payload": {"timeout": 600}})
    ignored = runtime.submit({"task": "durable-approval", "payload": {"timeout": 3}})
    fanout = runtime.submit({"task": "durable-fanout", "payload": 20})

    # The sleeping job is neither RUNNING nor held by any worker while it sleeps.
    runtime.wait_for([nap["job_id"]], {"SLEEPING"}, timeout=60)
    fell_asleep = time.monotonic()
    reports_since = 0
    while (job := runtime.job(nap["job_id"]))["state"] == "SLEEPING":
        assert job["sleeping_until"] and job["waiting"] == "sleep"
        slept_at = [when(h["at"]) for h in job["history"] if h["to"] == "SLEEPING"][-1]
        # Every worker's report made a second after the job fell asleep (a busy worker reports
        # every 0.5 s what it holds; a report takes its list a moment before its time)
        # leaves it out: no worker holds it. Its wake-up message may arrive up to a second
        # early (SQS delays are whole seconds), and the worker that gets it waits out the rest.
        earliest = slept_at + timedelta(seconds=1)
        latest = when(job["sleeping_until"]) - timedelta(seconds=1.2)
        for worker in runtime.call("GET", "/workers").body["workers"]:
            if earliest < when(worker["last_heartbeat"]) < latest:
                reports_since += 1
                assert nap["job_id"] not in worker["current_jobs"], worker
        time.sleep(0.25)
    slept = time.monotonic() - fell_asleep
    assert slept >= 3.0, slept  # 4 s less the time it took to see it asleep
    assert reports_since >= 1

    # Completed over HTTP (the CLI: leasehold callback complete TOKEN VALUE).
    token = token_of(runtime, approved["job_id"])
    completed = subprocess.run(
        [sys.executable, "-m", "leasehold.cli", "callback", "complete", token,
         '{"by": "ann"}', "--url", runtime.url, "--tenant", "default", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    again = runtime.call("POST", f"/callbacks/{token}", {"by": "bob"})
    assert (again.status, again.body["changed"]) == (200, False)
    assert runtime.call("POST", f"/callbacks/{token}", 1, tenant="other").status == 404

    done = runtime.wait_for([order["job_id"], nap["job_id"], approved["job_id"],
                             ignored["job_id"], fanout["job_id"]], timeout=90)
    assert done[nap["job_id"]]["result"] == "rested"
    result = done[order["job_id"]]["result"]
    assert done[order["job_id"]]["state"] == "SUCCEEDED" and result["attempt"] == 2
    assert ledger.read_text().splitlines() == [result["charged"]]  # charged once
    assert done[approved["job_id"]]["result"] == {"approved": {"by": "ann"}}
    assert done[ignored["job_id"]]["result"] == "timed out"
    assert done[fanout["job_id"]]["result"] == [2 * i for i in range(20)]
    steps = runtime.call("GET", f"/jobs/{order['job_id']}/steps").body["steps"]
    assert [s["name"] for s in steps] == ["charge", "ship"]
