"""Concurrency keys through ``leasehold dev`` with lost responses (``LEASEHOLD_FAULTS``).

Two keys of ten one-second jobs each, at limit 2, run side by side on a runtime with room for
eight at once: never more than two of a key run at once (read from every handler's own start
and end), both keys drain within three times the ideal five seconds (first start to last
end), and afterwards both keys' slots are free and nothing waits.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold.cli import main

from .conftest import Runtime, start_runtime

pytestmark = pytest.mark.e2e

WRITES = "dynamodb.PutItem|dynamodb.UpdateItem|dynamodb.TransactWriteItems"
FAULTS = f"{WRITES}:lose:0.1"
KEYS = ("acct-a", "acct-b")
PER_KEY, LIMIT, SECONDS = 10, 2, 1.0


@pytest.fixture(scope="module")
def faulty() -> Iterator[Runtime]:
    started = start_runtime("--workers", "2", "--concurrency", "4", "--batch-size", "1",
                            "--tasks", "tests.e2e.flow_tasks", env={
        "LEASEHOLD_FAULTS": FAULTS, "LEASEHOLD_FAULTS_SEED": "5",
        "LEASEHOLD_FLOW_RECHECK_SECONDS": "3"})
    yield started
    assert started.stop() == 0


def most_running_at_once(jobs: list[dict[str, Any]]) -> int:
    """The most of these jobs' handlers that ran at one instant (from their own clocks)."""
    edges = sorted([(job["result"]["began"], 1) for job in jobs] +
                   [(job["result"]["ended"], -1) for job in jobs])  # ends before starts
    running = most = 0
    for _, change in edges:
        running += change
        most = max(most, running)
    return most


def test_two_keys_run_side_by_side_at_their_limit_under_lost_responses(
        faulty: Runtime) -> None:
    ids: dict[str, list[str]] = {key: [] for key in KEYS}
    begun = time.monotonic()
    for i in range(PER_KEY):
        for key in KEYS:
            body = {"task": "timed_sleep", "payload": {"seconds": SECONDS, "account": key},
                    "idempotency_key": f"{key}-{i}",
                    "concurrency": {"key": "{payload.account}", "limit": LIMIT}}
            for _ in range(20):
                reply = faulty.call("POST", "/jobs", body)
                if reply.status in (200, 201):
                    break
                time.sleep(0.1)  # a 5xx: the same key again
            assert reply.status in (200, 201), reply.body
            ids[key].append(reply.body["job_id"])
    submitted = time.monotonic() - begun
    every = [job_id for key in KEYS for job_id in ids[key]]
    done = faulty.wait_for(every, timeout=60)
    elapsed = time.monotonic() - begun
    ideal = PER_KEY / LIMIT * SECONDS
    assert all(job["state"] == "SUCCEEDED" for job in done.values())
    for key in KEYS:
        jobs = [faulty.job(job_id) for job_id in ids[key]]
        assert most_running_at_once(jobs) <= LIMIT, key
        usage = faulty.call("GET", f"/flow/keys/{key}").body
        assert (usage["in_use"], usage["waiting"]) == (0, 0), usage
    # From the first start to the last end: the runtime's warm-up and the submissions (twenty
    # API calls under the same faults) are not the keys' work.
    results = [faulty.job(job_id)["result"] for job_id in every]
    span = max(r["ended"] for r in results) - min(r["began"] for r in results)
    print(f"two keys of {PER_KEY} at limit {LIMIT}: ran in {span:.1f}s (ideal {ideal:.1f}s), "
          f"{elapsed:.1f}s from the first submission ({submitted:.1f}s submitting); "
          f"faults: {FAULTS}")
    assert span <= 3 * ideal, f"drained in {span:.1f}s, ideal {ideal:.1f}s"


def test_the_cli_pauses_a_key_its_jobs_wait_and_resume_runs_them(
        faulty: Runtime, capsys: pytest.CaptureFixture[str]) -> None:
    def cli(*argv: str) -> Any:
        code = main([*argv, "--json", "--url", faulty.url, "--tenant", "cli"])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        return json.loads(captured.out)

    assert cli("flow", "pause", "reports")["paused"] is True
    body = {"task": "timed_sleep", "payload": {"seconds": 0}, "idempotency_key": "paused-1",
            "concurrency": {"key": "reports", "limit": 1}}
    for _ in range(20):  # lost responses: the same key again
        reply = faulty.call("POST", "/jobs", body, tenant="cli")
        if reply.status in (200, 201):
            break
    job_id = reply.body["job_id"]
    deadline = time.monotonic() + 20
    while faulty.job(job_id, "cli").get("waiting_for") != "paused: key reports is paused":
        assert time.monotonic() < deadline, faulty.job(job_id, "cli")
        time.sleep(0.2)
    [key] = cli("flow", "keys")["keys"]
    assert (key["key"], key["paused"], key["waiting"]) == ("reports", True, 1)
    # `leasehold status` says why the job waits and what it runs under.
    assert main(["status", job_id, "--url", faulty.url, "--tenant", "cli"]) == 0
    shown = capsys.readouterr().out
    assert "paused: key reports is paused" in shown
    assert "concurrency reports (limit 1)" in shown
    cli("flow", "resume", "reports")
    assert faulty.wait_for([job_id], tenant="cli", timeout=20)[job_id]["state"] == "SUCCEEDED"
