"""One ``leasehold dev`` per state directory, numbered backups on ``--fresh``, and a restart
after ``kill -9`` that keeps what was accepted seconds before and says what was lost
(issue 18, items 7 and 8)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import FAST, ROOT, Runtime, start_runtime

pytestmark = pytest.mark.e2e
#: How long the tests let a write take to reach state.json. A runtime that saves only every
#: 60 s (as before) misses it; the measured figure is printed (about a second).
SAVED_WITHIN = 15.0


def saved_jobs(directory: Path) -> dict[str, dict[str, Any]]:
    try:
        tables = json.loads((directory / "state.json").read_text())["tables"]
    except (FileNotFoundError, ValueError):
        return {}
    return {item["job_id"]["S"]: item for item in tables["jobs_table"] if "job_id" in item}


def wait_until_saved(directory: Path, job_id: str, state: str, since: float) -> float:
    """Seconds from ``since`` until ``state.json`` holds the job in ``state``."""
    while time.monotonic() - since < SAVED_WITHIN:
        if saved_jobs(directory).get(job_id, {}).get("state", {}).get("S") == state:
            return time.monotonic() - since
        time.sleep(0.1)
    raise AssertionError(f"{job_id} was not saved {state} within {SAVED_WITHIN:g}s")


def kill(runtime: Runtime) -> None:
    runtime.process.kill()  # SIGKILL: no drain, no final save
    runtime.process.wait(30)


def test_a_second_runtime_on_the_same_state_dir_refuses_naming_the_first(
        tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {"LEASEHOLD_STATE_DIR": str(state)}
    first = start_runtime("--workers", "1", env=env)
    try:
        second = subprocess.Popen(
            [sys.executable, "-m", "leasehold.cli", "dev", "--port", "0", *FAST,
             "--state-dir", str(state)], cwd=ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        try:
            _, err = second.communicate(timeout=45)
        except subprocess.TimeoutExpired:
            second.kill()
            second.communicate()
            pytest.fail("a second runtime started on the same state directory")
        assert second.returncode == 2, err
        assert f"pid {first.process.pid}" in err and str(state.resolve()) in err
        assert "--state-dir" in err and "Traceback" not in err
        job = first.submit({"task": "echo", "payload": "still mine"})["job_id"]
        assert first.wait_for([job])[job]["state"] == "SUCCEEDED"
        wait_until_saved(state, job, "SUCCEEDED", time.monotonic())
    finally:
        kill(first)

    # The killed runtime's lock went with its process: the next start is not blocked.
    again = start_runtime("--workers", "0", "--fresh", env=env)
    try:
        again.submit({"task": "echo", "payload": "second run"})
    finally:
        assert again.stop() == 0, "".join(again.output[-20:])
    third = start_runtime("--workers", "0", "--fresh", env=env)
    assert third.call("GET", "/jobs").body["jobs"] == []
    assert third.stop() == 0
    # Two --fresh starts, two backups: the second did not overwrite the first.
    first_run, second_run = (state / "state.json.old.1"), (state / "state.json.old.2")
    assert job in first_run.read_text() and job not in second_run.read_text()
    assert "second run" in second_run.read_text()
    assert (state / "events.jsonl.old.1").exists() and (state / "events.jsonl.old.2").exists()


def test_after_kill_9_the_restart_says_so_and_keeps_work_accepted_seconds_before(
        tmp_path: Path) -> None:
    state = (tmp_path / "state").resolve()
    env = {"LEASEHOLD_STATE_DIR": str(state)}
    first = start_runtime("--workers", "1", env=env)
    try:
        started = time.monotonic()
        done = first.submit({"task": "echo", "payload": "finished"})["job_id"]
        first.wait_for([done])
        finished = time.monotonic()
        running = first.submit({"task": "sleep", "payload": {"seconds": 10}})["job_id"]
        accepted = time.monotonic()
        waiting = first.submit({"task": "echo", "payload": "later", "delay_seconds": 600})
        schedule = first.call("POST", "/schedules", {"cron": "@daily", "task": "ping"}).body
        first.wait_for([running], {"RUNNING"})
        windows = {
            "accepted": wait_until_saved(state, waiting["job_id"], waiting["state"], accepted),
            "finished": wait_until_saved(state, done, "SUCCEEDED", finished),
            "running": wait_until_saved(state, running, "RUNNING", accepted),
        }
        print(f"\nloss window (s from the write to state.json): {windows}; first job "
              f"accepted {accepted - started:.1f}s after start")
    finally:
        kill(first)

    second = start_runtime("--workers", "1", env=env)
    try:
        said = "".join(second.output)
        assert "did not stop cleanly" in said and str(state) in said, said
        assert "last save was at" in said and "work accepted after that is lost" in said
        assert "may run again" in said
        kept = second.job(waiting["job_id"])
        assert kept["state"] == waiting["state"]
        assert [s["schedule_id"] for s in second.call("GET", "/schedules").body["schedules"]] \
            == [schedule["schedule_id"]]
        assert second.job(done)["attempts"] == 1 and second.job(done)["state"] == "SUCCEEDED"
        # RUNNING when killed: re-driven by the sweeper once its lease (2 s here) expires.
        again = second.wait_for([running], timeout=60)[running]
        assert again["state"] == "SUCCEEDED" and again["crash_recoveries"] == 1, again
    finally:
        assert second.stop() == 0, "".join(second.output[-20:])
    assert any(line.startswith("Saved ") for line in second.output)

    third = start_runtime("--workers", "0", env=env)  # after a clean stop: nothing to say
    try:
        assert third.job(done)["state"] == "SUCCEEDED"
        assert "did not stop cleanly" not in "".join(third.output)
    finally:
        assert third.stop() == 0
