"""What `leasehold status` and `leasehold submit` print about flow control (issue 22) and
a durable job's children (issue 29)."""

from __future__ import annotations

from typing import Any

from leasehold.cli.output import show_job


def job(**extra: Any) -> dict[str, Any]:
    return {"job_id": "j1", "task": "sync", "state": "QUEUED", "pool": "default",
            "priority": "normal", "attempts": 0, "max_attempts": 3,
            "created_at": "2026-11-26T06:00:00.000Z", **extra}


def test_a_waiting_job_says_why_and_what_it_runs_under() -> None:
    text = show_job(job(
        waiting_for="waiting for a slot of key acct-9 (1 of 1 in use)",
        flow={"concurrency": {"key": "acct-9", "limit": 1},
              "throttle": {"key": "api", "limit": 5, "period_seconds": 2.0, "burst": 5},
              "unique": {"key": "import:1"}, "debounce": {"key": "d", "seconds": 1.5},
              "start_by": "2026-11-26T06:10:00.000Z"}))
    assert "waiting for a slot of key acct-9 (1 of 1 in use)" in text
    assert ("concurrency acct-9 (limit 1) · throttle api (5 per 2 s, burst 5) · unique "
            "import:1 · debounce d (1.5 s) · start by 2026-11-26T06:10:00.000Z") in text


def test_a_submission_answered_by_a_live_job_or_a_window_says_so() -> None:
    assert "a live job with this unique key answered" in show_job(job(duplicate=True))
    assert "debounced into this job" in show_job(job(coalesced=True))
    plain = show_job(job())
    assert "unique" not in plain and "debounce" not in plain and "flow" not in plain


def test_a_parent_shows_its_children_and_a_child_its_parent() -> None:
    text = show_job(job(state="SLEEPING", waiting="children",
                        sleeping_until="2026-11-26T06:05:00.000Z", more_children=True,
                        children=[
        {"name": "kid.1", "job_id": "c1", "task": "kid", "state": "RUNNING",
         "on_parent_end": "cancel", "own": True},
        {"name": "one", "job_id": "u1", "task": "sync", "state": "QUEUED",
         "on_parent_end": "abandon", "own": False}]))
    lines = text.splitlines()
    assert "until 2026-11-26T06:05:00.000Z (children)" in text
    assert lines[-4].split() == ["CHILD", "JOB", "TASK", "STATE", "ON", "PARENT", "END"]
    assert lines[-3].split() == ["kid.1", "c1", "kid", "RUNNING", "cancel"]
    assert lines[-2].split() == ["one", "u1", "sync", "QUEUED", "not", "its", "own"]
    assert lines[-1] == "(the first 2 children, by name)"
    child = show_job(job(parent_id="p1", on_parent_end="cancel"))
    assert "p1 (on its end: cancel)" in child and "CHILD" not in child


def test_a_job_shows_the_code_version_that_first_ran_it_and_each_attempt_s() -> None:
    lease = {"at": "2026-11-26T06:00:01.000Z", "from": "QUEUED", "to": "RUNNING", "by": "w1",
             "reason": "lease"}
    text = show_job(job(code_version="3f9a1c2b7d4e", history=[
        {**lease, "code_version": "3f9a1c2b7d4e"}, {**lease, "code_version": "77aa00bb11cc"}]),
        history=True)
    assert "3f9a1c2b7d4e (first run)" in text
    assert [line.split()[-1] for line in text.splitlines()[-2:]] == ["3f9a1c2b7d4e",
                                                                     "77aa00bb11cc"]
    assert "code version" not in show_job(job())
