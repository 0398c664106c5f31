"""``leasehold jobs bulk``: its search options become POST /jobs/bulk's filter, and bad input
is refused before any request, naming the option (issue 25)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from leasehold.cli import main, parser
from leasehold.cli.bulk import search, show

NOW = datetime(2026, 3, 1, 16, 0, tzinfo=UTC)


def test_the_issue_example_becomes_a_filter_from_two_hours_ago() -> None:
    args = parser().parse_args(["jobs", "bulk", "retry", "--error-type", "Timeout",
                                "--since", "2h", "--dry-run", "--label", "env:prod",
                                "--until", "2026-03-01T15:30:00+01:00", "--state", "dead"])
    assert (args.verb, args.dry_run) == ("retry", True)
    assert search(args, NOW) == {
        "error_type": "Timeout", "label": ["env:prod"], "state": ["DEAD"],
        "created_after": "2026-03-01T14:00:00Z", "created_before": "2026-03-01T14:30:00Z"}


@pytest.mark.parametrize(("argv", "named"), [
    (["--since", "yesterday"], "--since: 'yesterday' is neither"),
    (["--until", "2026-03-01T10:00:00"], "--until: '2026-03-01T10:00:00' needs a time zone"),
])
def test_bad_times_are_refused_before_any_request(argv: list[str], named: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["jobs", "bulk", "cancel", *argv, "--url", "http://127.0.0.1:9"])
    assert code != 0
    assert named in capsys.readouterr().err


def test_a_preview_and_a_progress_read_plainly() -> None:
    text = show({"dry_run": True, "action": "retry", "matches": 120, "complete": False,
                 "sample": ["A", "B"]})
    assert "would retry" in text and "120+ (stopped counting)" in text and "A, B" in text
    text = show({"bulk_id": "X", "job_id": "X", "state": "RUNNING",
                 "progress": {"done": 40, "skipped": 2, "paused": "admission refused"}})
    assert "40" in text and "admission refused" in text and "leasehold status X" in text


def test_a_delete_says_how_many_rows_it_kept_and_why() -> None:
    text = show({"dry_run": True, "action": "delete", "matches": 1, "complete": True,
                 "sample": ["A"], "created_before": "2026-03-01T16:00:00.001Z",
                 "skipped_referenced": 5, "referenced_by": {"workflow": 4,
                                                            "durable parent": 1}})
    assert "would keep" in text and "5 (durable parent: 1, workflow: 4)" in text
    assert "2026-03-01T16:00:00.001Z" in text
    text = show({"bulk_id": "X", "job_id": "X", "state": "SUCCEEDED",
                 "created_before": "2026-03-01T16:00:00.001Z",
                 "result": {"done": 1, "skipped": 0, "skipped_referenced": 4,
                            "referenced_by": {"workflow": 4}}})
    assert "4 (workflow: 4): still referenced, kept" in text


@pytest.mark.parametrize("reply", [
    {"dry_run": True, "action": "retry", "matches": 3, "complete": True, "sample": ["A"],
     "created_before": "2026-11-28T04:26:23.775Z"},
    {"bulk_id": "B1", "action": "retry", "state": "RUNNING", "progress": {"done": 1},
     "created_before": "2026-11-28T04:26:23.775Z"},
])
def test_every_label_is_apart_from_its_value(reply: dict[str, object]) -> None:
    # A new user's dry run printed "created before2026-11-28T04:26:23.775Z" (issue 47).
    lines = show(reply).splitlines()
    assert lines and all("  " in line.rstrip() for line in lines), lines
    [line] = [line for line in lines if line.startswith("created before")]
    assert line.split() == ["created", "before", "2026-11-28T04:26:23.775Z"]
