"""Time in the real local runtime: delayed jobs and schedules start on time, a schedule fires
each occurrence once, a killed leader ticker loses nothing, and job events reach the log."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from leasehold.local import emulator

from .conftest import ROOT, Runtime, start_runtime

pytestmark = pytest.mark.e2e

#: Start lateness (start - requested time) allowed, in seconds: the issue's p99 target.
LATE = 2.0
#: SQS delays are whole seconds, rounded up, so a job never starts before its time; 50 ms
#: allows only for the millisecond rounding of the stored times.
EARLY = 0.05
#: How long the 2 s schedule is watched: `make soak` watches the minute the issue asks for
#: (LEASEHOLD_SCHEDULE_SPAN=60); `make test` watches 20 s, ten occurrences, each checked.
SCHEDULE_SPAN = int(os.environ.get("LEASEHOLD_SCHEDULE_SPAN", "20"))


def _ms(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)


def _lateness(job: dict[str, Any], since: str = "run_at") -> float:
    return (_ms(job["started_at"]) - _ms(job[since])) / 1000


def _summary(lateness: list[float]) -> str:
    ordered = sorted(lateness)
    return (f"n={len(ordered)} min={ordered[0]:.3f}s median={statistics.median(ordered):.3f}s "
            f"max={ordered[-1]:.3f}s")


def _banner(rt: Runtime, label: str) -> str:
    """The value of a banner line (``  events:    <value>``)."""
    for line in rt.output:
        if line.strip().startswith(label + ":"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {label!r} line in the banner:\n{''.join(rt.output)}")


def _wait_line(rt: Runtime, text: str, *, after: int = 0, timeout: float) -> float:
    """Wait until the runtime prints a line containing ``text``; when it was seen."""
    deadline = time.monotonic() + timeout
    while not any(text in line for line in rt.output[after:]):
        assert time.monotonic() < deadline, \
            f"no {text!r} within {timeout}s:\n{''.join(rt.output[-20:])}"
        time.sleep(0.05)
    return time.monotonic()


def _runs(rt: Runtime, schedule_id: str) -> list[dict[str, Any]]:
    """Every job the schedule has made (all pages)."""
    jobs: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        query = f"/jobs?schedule_id={schedule_id}&limit=200"
        page = rt.call("GET", query + (f"&cursor={cursor}" if cursor else "")).body
        jobs += page["jobs"]
        cursor = page.get("next_cursor")
        if not cursor:
            return jobs


def _wait_runs(rt: Runtime, schedule_id: str, count: int, *, timeout: float
               ) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        runs = _runs(rt, schedule_id)
        if sum(1 for job in runs if job["state"] == "SUCCEEDED") >= count:
            return runs
        assert time.monotonic() < deadline, f"fewer than {count} runs succeeded: {runs}"
        time.sleep(0.3)


def _assert_each_occurrence_once(runs: list[dict[str, Any]], first: int, last: int,
                                 step_ms: int) -> list[dict[str, Any]]:
    """Every occurrence in [first, last] has exactly one job, which succeeded exactly once."""
    counts = Counter(job["scheduled_for"] for job in runs)
    assert not [t for t, n in counts.items() if n > 1], f"duplicate occurrences: {counts}"
    window = sorted((job for job in runs if first <= _ms(job["scheduled_for"]) <= last),
                    key=lambda job: job["scheduled_for"])
    times = [_ms(job["scheduled_for"]) for job in window]
    assert times == list(range(times[0], times[-1] + 1, step_ms)), f"a gap: {times}"
    assert times[0] - first <= step_ms and last - times[-1] < step_ms, "an end is missing"
    for job in window:
        assert job["state"] == "SUCCEEDED", job
        assert sum(1 for h in job["history"] if h["to"] == "SUCCEEDED") == 1, job
    return window


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    """This module's runtime, with its event log in a temporary directory."""
    log = tmp_path_factory.mktemp("events") / "events.jsonl"
    started = start_runtime("--workers", "2", "--concurrency", "4", "--batch-size", "1",
                            "--event-log", str(log))
    yield started
    code = started.stop()
    assert code == 0, "".join(started.output[-30:])


def test_delayed_jobs_start_within_two_seconds_of_their_time(runtime: Runtime) -> None:
    delayed = runtime.submit({"task": "echo", "delay_seconds": 3})["job_id"]
    at = (datetime.now(UTC) + timedelta(seconds=4.5)).isoformat()
    timed = runtime.submit({"task": "echo", "run_at": at})["job_id"]
    assert _ms(runtime.job(timed)["run_at"]) == _ms(at)
    done = runtime.wait_for([delayed, timed], timeout=20)
    lateness = {name: _lateness(done[job_id])
                for name, job_id in (("delay_seconds=3", delayed), ("run_at", timed))}
    print(f"delayed job start lateness (s): {lateness}")
    assert {job["state"] for job in done.values()} == {"SUCCEEDED"}
    assert all(-EARLY <= late <= LATE for late in lateness.values()), lateness


def test_a_two_second_schedule_fires_every_occurrence_once_and_on_time(
        runtime: Runtime) -> None:
    created = runtime.call("POST", "/schedules", {
        "name": "every-2s", "cron": "*/2 * * * * *", "task": "echo", "payload": {"n": 1}})
    assert created.status == 201, created.body
    schedule_id = created.body["schedule_id"]
    began = int(time.time() * 1000)
    time.sleep(SCHEDULE_SPAN)  # the span observed, not an assertion about ordering
    ended = int(time.time() * 1000)
    paused = runtime.call("POST", f"/schedules/{schedule_id}/pause")
    assert paused.status == 200 and paused.body["state"] == "PAUSED"
    # The occurrences of the span, leaving out the last second (maybe still starting).
    last = ended - 1000
    deadline = time.monotonic() + 15
    while True:
        runs = _runs(runtime, schedule_id)
        inside = [job for job in runs if began <= _ms(job["scheduled_for"]) <= last]
        if all(job["state"] == "SUCCEEDED" for job in inside) or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    window = _assert_each_occurrence_once(runs, began, last, 2000)
    assert len(window) >= SCHEDULE_SPAN // 2 - 1
    # Everything it had handed off ahead of time was withdrawn by the pause: not run, and
    # no CANCELLED row left behind (issue 25).
    after = [job for job in runs if _ms(job["scheduled_for"]) > ended + 1000]
    assert after == [], after
    lateness = [_lateness(job, "scheduled_for") for job in window]
    print(f"2 s schedule start lateness: {_summary(lateness)}")
    assert all(-EARLY <= late <= LATE for late in lateness), lateness
    assert runtime.call("DELETE", f"/schedules/{schedule_id}").status in (200, 204)


def test_the_event_log_shows_a_job_queued_running_succeeded(runtime: Runtime) -> None:
    log = _banner(runtime, "events").split()[0]
    job_id = runtime.submit({"task": "echo", "payload": "events"})["job_id"]
    assert runtime.wait_for([job_id])[job_id]["state"] == "SUCCEEDED"
    expected = ["- -> QUEUED", "QUEUED -> RUNNING", "RUNNING -> SUCCEEDED"]
    deadline = time.monotonic() + 10
    while True:  # the worker writes its last event just after its transition
        tail = subprocess.run([sys.executable, "-m", "leasehold.cli", "events", "tail",
                               "--log", log], cwd=ROOT, capture_output=True, text=True,
                              timeout=30)
        assert tail.returncode == 0, tail.stderr
        mine = [line for line in tail.stdout.splitlines() if job_id in line]
        if len(mine) >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [line.split("echo", 1)[1].strip() for line in mine] == expected, mine
    assert [line.split()[1:3] for line in mine] == [
        ["Job", "Queued"], ["Job", "Running"], ["Job", "Succeeded"]]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_killed_leader_ticker_loses_no_occurrence_and_doubles_none(tmp_path: Path) -> None:
    # The embedded emulator dies with its runtime, so both runtimes share one started here,
    # as ECS tickers share the tables. A 1 s lookahead makes the leader fire each occurrence
    # just in time: with the default 90 s it would have made every job of this test before
    # being killed, and the standby would have nothing to prove.
    aws = emulator.start()
    env = {"AWS_ACCESS_KEY_ID": "leasehold-local", "AWS_SECRET_ACCESS_KEY": "leasehold-local"}
    args = ["--endpoint", aws.endpoint, "--workers", "1", "--batch-size", "1",
            "--leader-lease-seconds", "2", "--lookahead-seconds", "1",
            "--event-log", str(tmp_path / "events.jsonl")]
    leader = standby = None
    try:
        leader = start_runtime(*args, env={**env, "LEASEHOLD_PROVISION": "1"})
        _wait_line(leader, "ticker: leading", timeout=10)
        standby = start_runtime(*args, env=env)
        _wait_line(standby, "ticker: standing by", timeout=10)
        created = leader.call("POST", "/schedules", {
            "name": "failover", "cron": "rate(2 seconds)", "task": "echo"})
        assert created.status == 201, created.body
        schedule_id = created.body["schedule_id"]
        began = _ms(created.body["created_at"])
        _wait_runs(leader, schedule_id, 2, timeout=10)

        seen = len(standby.output)
        assert not any("ticker: leading" in line for line in standby.output)
        leader.process.kill()  # SIGKILL: no lease release, no draining
        killed = time.monotonic()
        killed_ms = int(time.time() * 1000)
        leader.process.wait(10)
        took_over = _wait_line(standby, "ticker: leading", after=seen, timeout=10) - killed
        print(f"standby took over {took_over:.2f}s after the leader was killed")
        # One lease period, plus a tick of the standby and a little scheduling slack.
        assert took_over <= 2 + 0.5 + 1.5

        # Let the standby fire a few occurrences on its own, then look at the whole span.
        time.sleep(6)  # the span observed, not an assertion about ordering
        last = int(time.time() * 1000) - 1000
        runs = _runs(standby, schedule_id)
        deadline = time.monotonic() + 15
        while any(job["state"] != "SUCCEEDED" for job in runs
                  if _ms(job["scheduled_for"]) <= last) and time.monotonic() < deadline:
            time.sleep(0.3)
            runs = _runs(standby, schedule_id)
        window = _assert_each_occurrence_once(runs, began, last, 2000)
        by_standby = [job for job in window if _ms(job["created_at"]) > killed_ms]
        assert len(by_standby) >= 3, "the standby should have fired the later occurrences"
        lateness = [_lateness(job, "scheduled_for") for job in window]
        print(f"failover schedule start lateness: {_summary(lateness)}")
        # Occurrences due while nobody held the lease start late, by at most about one
        # lease period; none is skipped (they are within the misfire starting deadline).
        assert max(lateness) <= 2 + 0.5 + LATE

        # The dead runtime's workers noticed and left; nothing of it lives on.
        pids = [int(p) for p in _banner(leader, "workers").rsplit(":", 1)[1].split()]
        deadline = time.monotonic() + 15
        while any(_alive(pid) for pid in pids):
            assert time.monotonic() < deadline, "the killed runtime's workers are still alive"
            time.sleep(0.2)
        assert standby.stop() == 0, "".join(standby.output[-30:])
    finally:
        for rt in (standby, leader):  # after a failure: stop before the emulator goes
            if rt is not None and rt.process.poll() is None:
                rt.stop()
        aws.stop()
