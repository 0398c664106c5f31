"""One conformance suite for every worker language (docs/protocol.md, "The conformance task
set").

Each scenario runs against each language's reference worker through one ``leasehold dev``
(lease 2 s, sweep 0.5 s, skew grace 1 s). The concurrency scenario runs all three
languages side by side."""

from __future__ import annotations

import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.conftest import LANGUAGES, REFERENCE, Workers, lines, wait_until
from tests.e2e.conftest import Runtime

pytestmark = pytest.mark.e2e

TERMINAL = {"SUCCEEDED", "DEAD", "CANCELLED"}


def submit(runtime: Runtime, task: str, payload: Any, tenant: str = "conf", **extra: Any
           ) -> str:
    return str(runtime.submit({"task": task, "payload": payload, **extra},
                              tenant=tenant)["job_id"])


def finished(runtime: Runtime, job_ids: Sequence[str], tenant: str = "conf",
             timeout: float = 30) -> dict[str, dict[str, Any]]:
    return runtime.wait_for(list(job_ids), tenant=tenant, timeout=timeout)


def started_by(log: Path, job_id: str) -> list[str]:
    return [line[3] for line in lines(log) if line[0] == "start" and line[1] == job_id]


def named(result: dict[str, Any], language: str) -> dict[str, Any]:
    """``result`` with its ``language`` checked: a reference worker names its own; any other
    worker may name its language as it likes (docs/protocol.md: any non-empty word)."""
    said = result.get("language")
    if language in REFERENCE:
        assert said == language, result
    else:
        assert isinstance(said, str) and said and " " not in said, result
    return {k: v for k, v in result.items() if k != "language"}


@pytest.mark.parametrize("language", LANGUAGES)
def test_success_with_a_result(runtime: Runtime, workers: Workers, language: str) -> None:
    worker = workers.start(language)
    job_id = submit(runtime, "conformance.echo", {"x": [1, "two"]})
    job = finished(runtime, [job_id])[job_id]
    assert job["state"] == "SUCCEEDED"
    assert named(job["result"], language) == {"echo": {"x": [1, "two"]},
                                              "worker_id": worker.worker_id, "attempt": 1}


@pytest.mark.parametrize("language", LANGUAGES)
def test_failure_retries_then_dead_then_redrive(runtime: Runtime, workers: Workers,
                                                language: str) -> None:
    workers.start(language)
    retry = {"min_backoff_seconds": 0, "max_backoff_seconds": 0}
    job_id = submit(runtime, "conformance.fail", {"message": "nope"}, max_attempts=2,
                    retry=retry)
    job = finished(runtime, [job_id])[job_id]
    assert (job["state"], job["attempts"]) == ("DEAD", 2)
    assert job["error"]["type"] == "ConformanceError" and job["error"]["message"] == "nope"
    final = submit(runtime, "conformance.fail", {"retryable": False}, max_attempts=5)
    job = finished(runtime, [final])[final]
    assert (job["state"], job["attempts"], job["error"]["message"]) == ("DEAD", 1, "boom")
    # Redrive: a re-run from scratch (attempts start again), which now succeeds.
    redriven = submit(runtime, "conformance.fail", {"succeed_on_attempt": 2}, max_attempts=1)
    assert finished(runtime, [redriven])[redriven]["state"] == "DEAD"
    assert runtime.call("POST", f"/jobs/{redriven}/retry", tenant="conf").status == 200
    job = finished(runtime, [redriven])[redriven]
    assert job["state"] == "DEAD" and job["attempts"] == 1  # ran again, from attempt 1


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_job_longer_than_its_lease_is_kept_by_heartbeats(
        runtime: Runtime, workers: Workers, language: str, log: Path) -> None:
    worker = workers.start(language)
    # 3.5 s: past the 2 s lease and the 1 s skew grace, so only heartbeats keep it.
    job_id = submit(runtime, "conformance.sleep", {"seconds": 3.5, "log": str(log)})
    job = finished(runtime, [job_id])[job_id]
    assert job["state"] == "SUCCEEDED" and job["attempts"] == 1
    assert named(job["result"], language) == {"slept": 3.5, "worker_id": worker.worker_id}
    assert started_by(log, job_id) == [worker.worker_id]  # never taken over


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_stopped_worker_loses_its_lease_and_its_late_result(
        runtime: Runtime, workers: Workers, language: str, log: Path) -> None:
    first = workers.start(language)
    job_id = submit(runtime, "conformance.sleep", {"seconds": 2.5, "log": str(log)})
    wait_until(lambda: started_by(log, job_id), 10, "the first start")
    first.signal(signal.SIGSTOP)
    second = workers.start(language)
    wait_until(lambda: len(started_by(log, job_id)) == 2, 15, "the takeover")
    first.signal(signal.SIGCONT)  # its late heartbeat or completion gets 409
    job = finished(runtime, [job_id])[job_id]
    assert job["state"] == "SUCCEEDED" and job["attempts"] == 2
    assert job["result"]["worker_id"] == second.worker_id
    time.sleep(1.0)  # whatever the first worker still sends changes nothing
    assert runtime.job(job_id, tenant="conf")["result"]["worker_id"] == second.worker_id


@pytest.mark.parametrize("language", LANGUAGES)
def test_cancel_is_observed_through_the_heartbeat(
        runtime: Runtime, workers: Workers, language: str, log: Path) -> None:
    worker = workers.start(language)
    job_id = submit(runtime, "conformance.sleep", {"seconds": 20, "log": str(log)})
    wait_until(lambda: started_by(log, job_id), 10, "the start")
    assert runtime.call("DELETE", f"/jobs/{job_id}", tenant="conf").status == 200
    job = finished(runtime, [job_id], timeout=10)[job_id]
    assert job["state"] == "CANCELLED"
    wait_until(lambda: any(line[0] == "cancelled" and line[1] == job_id
                           and line[3] == worker.worker_id for line in lines(log)),
               5, "the task's cancellation")


@pytest.mark.parametrize("language", LANGUAGES)
def test_sigterm_lets_in_flight_jobs_finish(runtime: Runtime, workers: Workers,
                                            language: str, log: Path) -> None:
    worker = workers.start(language)
    ids = [submit(runtime, "conformance.sleep", {"seconds": 1.5, "log": str(log)})
           for _ in range(2)]
    wait_until(lambda: all(started_by(log, j) for j in ids), 10, "both starts")
    worker.signal(signal.SIGTERM)
    assert worker.process.wait(20) == 0
    jobs = [runtime.job(j, tenant="conf") for j in ids]
    assert [j["state"] for j in jobs] == ["SUCCEEDED", "SUCCEEDED"]  # none left leased


@pytest.mark.parametrize("language", LANGUAGES)
def test_a_worker_killed_mid_job_is_run_again_once(
        runtime: Runtime, workers: Workers, language: str, log: Path) -> None:
    first = workers.start(language)
    job_id = submit(runtime, "conformance.sleep", {"seconds": 2, "log": str(log)})
    wait_until(lambda: started_by(log, job_id), 10, "the start")
    first.signal(signal.SIGKILL)
    first.process.wait()
    second = workers.start(language)
    job = finished(runtime, [job_id])[job_id]
    assert job["state"] == "SUCCEEDED" and job["attempts"] == 2
    assert started_by(log, job_id) == [first.worker_id, second.worker_id]


@pytest.mark.parametrize("language", LANGUAGES)
def test_priorities_and_fairness_between_tenants(
        runtime: Runtime, workers: Workers, language: str, log: Path, tmp_path: Path) -> None:
    low = [submit(runtime, "conformance.echo", {"log": str(log)}, priority="low")
           for _ in range(2)]
    high = [submit(runtime, "conformance.echo", {"log": str(log)}, priority="high")
            for _ in range(2)]
    one = workers.start(language, max_jobs=1)
    finished(runtime, low + high)
    order = [line[1] for line in lines(log) if line[0] == "start"]
    assert set(order[:2]) == set(high) and set(order[2:]) == set(low)
    one.stop()
    # Fairness: a quiet tenant's job submitted after a noisy tenant's backlog does not wait
    # behind all of it (FIFO would start it last).
    fair = tmp_path / "fair.log"
    noisy = [submit(runtime, "conformance.sleep", {"seconds": 0.3, "log": str(fair)},
                    tenant="noisy") for _ in range(6)]
    quiet = submit(runtime, "conformance.sleep", {"seconds": 0.3, "log": str(fair)},
                   tenant="quiet")
    workers.start(language, max_jobs=4)
    finished(runtime, noisy, tenant="noisy")
    finished(runtime, [quiet], tenant="quiet")
    order = [line[1] for line in lines(fair) if line[0] == "start"]
    assert order.index(quiet) < max(order.index(n) for n in noisy[4:])


def test_a_concurrency_key_holds_across_languages(runtime: Runtime, workers: Workers,
                                                  log: Path) -> None:
    for language in ("python", "typescript", "java"):
        workers.start(language)
    ids = [submit(runtime, "conformance.sleep", {"seconds": 0.5, "log": str(log)},
                  concurrency={"key": "shared", "limit": 2}) for _ in range(10)]
    jobs = finished(runtime, ids, timeout=60)
    assert {j["state"] for j in jobs.values()} == {"SUCCEEDED"}
    running, most = 0, 0
    events = sorted((int(line[4]), 0 if line[0] == "end" else 1) for line in lines(log)
                    if line[0] in ("start", "end"))
    for _, starting in events:  # an end at the same millisecond counts first
        running += 1 if starting else -1
        most = max(most, running)
    assert most <= 2 and len(events) == 20
