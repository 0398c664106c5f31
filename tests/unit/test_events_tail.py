"""``leasehold events tail`` shows each change once: the relay publishes at least once, and a
relay killed mid-batch writes the batch's events to the log again, with the same ids."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from leasehold.cli.events import Repeats, run_tail


def _event(job: str, state: str, event_id: str | None) -> dict[str, object]:
    detail = {"job_id": job, "task": "echo", "state": state, "tenant": "t"}
    if event_id is not None:
        detail["event_id"] = event_id
    return {"source": "leasehold.job", "detail-type": f"Job {state.capitalize()}",
            "time": "2026-01-01T00:00:00Z", "detail": detail}


def test_tail_shows_a_repeated_change_once_and_two_changes_in_one_state_twice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "events.jsonl"
    events = [_event("J1", "CANCELLED", "J1:5:2"), _event("J1", "CANCELLED", "J1:5:2"),
              _event("J1", "CANCELLED", "J1:5:4"),  # cancelled again after a workflow retry
              _event("J2", "QUEUED", None), _event("J2", "QUEUED", None)]  # an older log's
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    args = argparse.Namespace(log=str(log), follow=False, lines=10, all=False, job=None,
                              task=None, tenant=None, json=True)
    assert run_tail(args) == 0
    shown = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(e["detail"]["job_id"], e["detail"].get("event_id")) for e in shown] == [
        ("J1", "J1:5:2"), ("J1", "J1:5:4"), ("J2", None), ("J2", None)]


def test_tail_remembers_a_bounded_number_of_ids() -> None:
    repeats = Repeats(size=2)
    first, second, third = (_event("J", "QUEUED", f"J:1:{n}") for n in range(3))
    assert repeats.first(first) and repeats.first(second) and not repeats.first(first)
    assert repeats.first(third)
    assert repeats.first(first)  # forgotten: the oldest of more than two
