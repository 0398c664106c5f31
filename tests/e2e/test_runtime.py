"""The local runtime under load and under a crash: every job ends SUCCEEDED, exactly once."""

from __future__ import annotations

import os
import signal
import statistics
import time
from datetime import UTC, datetime, timedelta

import pytest

from .conftest import Runtime

pytestmark = pytest.mark.e2e


def _ms(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000


def successes(job: dict) -> int:
    return sum(1 for h in job["history"] if h["to"] == "SUCCEEDED")


def test_200_jobs_across_priorities_all_succeed_and_high_waits_less(runtime: Runtime) -> None:
    priorities = ("high", "normal", "low")
    ids: dict[str, list[str]] = {p: [] for p in priorities}
    # Every job is due at the same moment, after all are submitted, so a real backlog of 200
    # forms at once and only the workers' poll order decides who waits. (Submitting them
    # to run now would measure the API's pace, not the priorities.)
    probes = [runtime.submit({"task": "echo", "priority": "high"})["job_id"]]  # warm up
    began = time.monotonic()
    probes += [runtime.submit({"task": "echo", "priority": "high"})["job_id"] for _ in range(5)]
    per_submit = (time.monotonic() - began) / 5
    due = datetime.now(UTC) + timedelta(seconds=2 + per_submit * 200 * 1.4)
    for i in range(200):
        priority = priorities[i % 3]
        job = runtime.submit({"task": "echo", "payload": i, "priority": priority,
                              "run_at": due.isoformat()})
        ids[priority].append(job["job_id"])
    every = [j for group in ids.values() for j in group]
    done = runtime.wait_for(every, timeout=120)
    assert {job["state"] for job in done.values()} == {"SUCCEEDED"}
    assert all(successes(job) == 1 for job in done.values())
    assert {runtime.job(p)["state"] for p in probes} == {"SUCCEEDED"}
    waits = {p: statistics.mean(_ms(done[j]["started_at"]) - _ms(done[j]["run_at"])
                                for j in ids[p]) for p in priorities}
    print(f"mean wait after due time (ms): {waits}")
    assert waits["high"] < waits["low"]


def test_a_worker_killed_mid_jobs_loses_none_and_runs_none_twice(runtime: Runtime) -> None:
    ids = [runtime.submit({"task": "sleep", "payload": {"seconds": 1.5}})["job_id"]
           for _ in range(12)]
    deadline = time.monotonic() + 30
    victim = None
    while victim is None and time.monotonic() < deadline:
        for worker in runtime.call("GET", "/workers").body["workers"]:
            if set(worker["current_jobs"]) & set(ids):
                victim = worker
                break
        time.sleep(0.1)
    assert victim is not None, "no worker picked the jobs up"
    os.kill(victim["pid"], signal.SIGKILL)
    done = runtime.wait_for(ids, timeout=90)
    assert {job["state"] for job in done.values()} == {"SUCCEEDED"}
    assert all(successes(job) == 1 for job in done.values()), "a job finished twice"
    recovered = [job for job in done.values() if job["crash_recoveries"] >= 1]
    assert recovered, "the killed worker's jobs should have been recovered by the sweeper"
    assert all(job["attempts"] == 2 for job in recovered)
    deadline = time.monotonic() + 10
    while not any("restarted" in line for line in runtime.output):
        assert time.monotonic() < deadline, "the dead worker process was not replaced"
        time.sleep(0.2)
    pids = {w["pid"] for w in runtime.call("GET", "/workers").body["workers"]}
    assert victim["pid"] not in pids
