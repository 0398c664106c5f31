"""``leasehold dev`` keeps its jobs, schedules, triggers and dead letters across a restart,
``--fresh`` starts empty, and ``events tail`` never shows an earlier run's jobs as live."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT, Runtime, start_runtime

pytestmark = pytest.mark.e2e


def banner(runtime: Runtime, name: str) -> str:
    return next(line for line in runtime.output if line.strip().startswith(f"{name}:"))


def tail(log: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leasehold.cli", "events", "tail",
                           "--log", str(log), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)


def test_state_survives_a_restart_and_fresh_starts_empty(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {"LEASEHOLD_STATE_DIR": str(state)}
    first = start_runtime("--workers", "1", env=env)
    try:
        assert str(state.resolve()) in banner(first, "state")
        assert "started empty" in banner(first, "state")
        done = first.submit({"task": "echo", "payload": "before"})["job_id"]
        dead = first.submit({"task": "fail", "max_attempts": 1})["job_id"]
        first.wait_for([done, dead])
        # Still waiting in SQS when the runtime stops: SQS messages are not kept, the row is.
        later = first.submit({"task": "echo", "payload": "later", "delay_seconds": 8})
        schedule = first.call("POST", "/schedules", {"cron": "@daily", "task": "ping"}).body
        trigger = first.call("POST", "/triggers", {"pattern": {"source": ["shop"]},
                                                    "task": "echo"}).body
    finally:
        assert first.stop() == 0, "".join(first.output[-20:])
    assert any(line.startswith("Saved ") for line in first.output), first.output[-5:]

    second = start_runtime("--workers", "1", "--save-seconds", "0.5", env=env)
    try:
        assert "item(s) loaded" in banner(second, "state")
        assert second.job(done)["state"] == "SUCCEEDED"
        assert [j["job_id"] for j in second.call("GET", "/dead-letters").body["jobs"]] == [dead]
        assert [s["schedule_id"] for s in second.call("GET", "/schedules").body["schedules"]] \
            == [schedule["schedule_id"]]
        assert [t["trigger_id"] for t in second.call("GET", "/triggers").body["triggers"]] \
            == [trigger["trigger_id"]]
        ran = second.wait_for([later["job_id"]], timeout=40)[later["job_id"]]
        assert (ran["state"], ran["result"]) == ("SUCCEEDED", "later")

        log = Path(banner(second, "events").split()[1])
        # The change-stream relay publishes within a pass or two (its idle back-off is 3 s).
        deadline = time.monotonic() + 15
        while f"{later['job_id']}  echo  RUNNING -> SUCCEEDED" not in tail(log).stdout:
            assert time.monotonic() < deadline, tail(log).stdout
            time.sleep(0.2)
        shown = tail(log)
        assert shown.returncode == 0, shown.stderr
        assert done not in shown.stdout and dead not in shown.stdout  # an earlier run's
        assert "earlier runs are hidden" in shown.stderr
        assert f"{later['job_id']}  echo  QUEUED -> RUNNING" in shown.stdout
        everything = tail(log, "--all", "-n", "100")
        assert done in everything.stdout and "--- leasehold dev started at" in everything.stdout
        only = tail(log, "--all", "-n", "100", "--job", dead).stdout.splitlines()
        assert only and all(dead in line for line in only if not line.startswith("---"))
        assert tail(log, "--all", "--task", "fail", "-n", "100").stdout.count(dead) >= 3
        assert tail(log, "--all", "--tenant", "nobody", "-n", "100").stdout.count("Job ") == 0
        assert len(tail(log, "--all", "-n", "2").stdout.splitlines()) == 2

        # Killed, not stopped: what the last autosave held survives.
        survivor = second.submit({"task": "echo", "payload": "killed"})["job_id"]
        second.wait_for([survivor])
        saved = state / "state.json"
        deadline = time.monotonic() + 10
        while survivor not in saved.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        second.process.kill()  # SIGKILL: no drain, no final save
        second.process.wait(30)

    fresh = start_runtime("--workers", "1", "--fresh", env=env)
    try:
        assert "started empty" in banner(fresh, "state")
        assert fresh.call("GET", "/jobs").body["jobs"] == []
        assert survivor in (state / "state.json.old.1").read_text()  # autosaved, moved aside
    finally:
        assert fresh.stop() == 0


def test_events_tail_says_when_its_log_is_missing(tmp_path: Path) -> None:
    missing = tail(tmp_path / "nothing.jsonl")
    assert missing.returncode == 1
    assert missing.stderr.startswith(f"error: no event log at {tmp_path / 'nothing.jsonl'}")
    assert "leasehold dev" in missing.stderr and "Traceback" not in missing.stderr


def test_an_unreadable_state_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    saved = tmp_path / "state.json"
    saved.write_text('{"version": 0}')
    done = subprocess.run([sys.executable, "-m", "leasehold.cli", "dev", "--port", "0",
                           "--state-dir", str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert f"{saved} was not written by this version" in done.stderr
    assert "--fresh" in done.stderr
    assert saved.read_text() == '{"version": 0}'  # not overwritten by the empty tables


def test_a_state_dir_of_the_old_jobs_table_is_refused_naming_fresh(tmp_path: Path) -> None:
    """A state dir saved before the jobs table's key changed (issue 46: version 1, keyed by
    job id alone; its file names no table versions) cannot be loaded into the new table:
    the start refuses it, says which table and version, and names the ways on."""
    saved = tmp_path / "state.json"
    old = json.dumps({"version": 1, "saved_at": "2026-11-01T00:00:00+00:00", "clean": True,
                      "tables": {"jobs_table": [{"job_id": {"S": "01KD0000000000000000000000"},
                                                 "tenant": {"S": "default"}}],
                                 "tenants_table": []}})
    saved.write_text(old)
    done = subprocess.run([sys.executable, "-m", "leasehold.cli", "dev", "--port", "0",
                           "--state-dir", str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert f"{saved} holds the jobs table at version 1" in done.stderr
    assert "keeps it at version 2" in done.stderr and "--fresh" in done.stderr
    assert "Traceback" not in done.stderr
    assert saved.read_text() == old  # left for the Leasehold that wrote it, or --fresh
