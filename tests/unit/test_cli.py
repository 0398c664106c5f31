"""The ``leasehold`` command without a server: help on every command and option, and input
mistakes that are caught before any request (each message names the argument)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasehold.cli import main, parser


def commands(root: argparse.ArgumentParser, path: str = "leasehold"
             ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command and sub-command, with the words that reach it."""
    yield path, root
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # an alias is the same parser
                    seen.add(id(sub))
                    yield from commands(sub, f"{path} {name}")


def test_every_command_and_option_has_help_and_every_command_an_example() -> None:
    found = list(commands(parser()))
    names = {path for path, _ in found}
    for expected in ("leasehold workers", "leasehold triggers list", "leasehold triggers create",
                     "leasehold events tail", "leasehold schedules list"):
        assert expected in names
    for path, command in found:
        assert command.epilog and "examples:" in command.epilog, path
        assert f"{path.split()[0]} " in command.epilog, path  # a runnable line
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
                continue
            assert action.help, f"{path} {action.option_strings or action.dest}: no help"
            if action.help == argparse.SUPPRESS or not action.option_strings:
                continue
            takes_value = action.nargs != 0
            if takes_value and not action.choices:
                assert "e.g." in action.help, f"{path} {action.option_strings}: no example"


def run(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main([*argv, "--url", "http://127.0.0.1:9"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("argv", "named"), [
    (["submit", "echo", '{"a":'], "payload: not JSON"),
    (["submit", "echo", "notjson"], "payload: not JSON"),
    (["submit", "echo", "@missing.json"], "payload: cannot read missing.json"),
    (["submit", "echo", "--label", "oops"], "--label: 'oops' is not KEY=VALUE"),
    (["submit", "echo", "--debounce", "k:soon"], "--debounce: 'k:soon' is not KEY:SECONDS"),
    (["schedules", "create", "--cron", "@daily", "--task", "echo", "--payload", "notjson"],
     "--payload: not JSON"),
    (["schedules", "create", "--cron", "@daily", "--workflow", "missing.json"],
     "--workflow: cannot read missing.json"),
    (["triggers", "create", "--pattern", "{", "--task", "echo"], "--pattern: not JSON"),
    (["workflow", "submit", "missing.json"], "file: cannot read missing.json"),
])
def test_bad_input_is_an_error_naming_the_argument_before_any_request(
        argv: list[str], named: str, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = run(*argv, capsys=capsys)
    assert code == 1
    assert err.startswith(f"error: {named}"), err
    assert "Traceback" not in err and "cannot reach" not in err  # no request was tried


def test_a_plain_string_payload_needs_raw(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run("submit", "echo", "hello", capsys=capsys)
    assert code == 1 and "--raw" in err
    _, err = run("submit", "echo", "hello", "--raw", capsys=capsys)
    assert "payload" not in err and "cannot reach the API at http://127.0.0.1:9" in err


def test_an_unreachable_api_says_so_in_words(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run("list", capsys=capsys)
    assert code == 1
    assert err.startswith("error: cannot reach the API at http://127.0.0.1:9 (")
    assert "0 unreachable" not in err and "leasehold dev" in err


def test_a_file_payload_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from leasehold.cli.inputs import read_json

    body = tmp_path / "mail.json"
    body.write_text(json.dumps({"to": "a@example.com"}))
    assert read_json("payload", f"@{body}") == {"to": "a@example.com"}


def test_output_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    event = {"source": "leasehold.job", "detail-type": "Job Queued", "time": "2026-01-01T00:00Z",
             "detail": {"job_id": "J1", "task": "echo", "state": "QUEUED", "tenant": "t"}}
    log.write_text((json.dumps(event) + "\n") * 2000)
    # The reader is gone before the command writes (as with `| head -1` on a long listing).
    process = subprocess.Popen(
        [sys.executable, "-m", "leasehold.cli", "events", "tail", "-n", "2000", "--log", str(log)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read().decode()
    assert process.wait(30) == 141
    assert "BrokenPipeError" not in err and "Traceback" not in err, err


def test_the_tail_marker_source_matches_the_runtime() -> None:
    from leasehold.cli.events import RUNTIME_SOURCE
    from leasehold.events.publishing import RUNTIME_SOURCE as WRITTEN

    assert RUNTIME_SOURCE == WRITTEN


def test_a_redrive_says_how_many_jobs_it_left_dead_and_why(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from leasehold.cli import admin

    answer = {"redriven": ["J1"], "stale_removed": 1, "left_in_place": 4,
              "left_because": "tenant 'acme' has 1 live jobs, its limit; wait for some to "
                              "finish", "retry_after_seconds": 5.0}
    monkeypatch.setattr(admin.Client, "request", lambda self, *args, **kwargs: answer)
    assert main(["dlq", "redrive", "--url", "http://127.0.0.1:9"]) == 0
    out = capsys.readouterr().out
    assert "redriven 1 job(s)\n  J1" in out
    assert "left 4 job(s) DEAD: tenant 'acme' has 1 live jobs, its limit" in out
    assert "redrive again in 5s" in out


def test_debounce_reads_key_seconds_and_max_wait_from_the_right() -> None:
    from leasehold.cli.jobs import _debounce

    assert _debounce("doc:{payload.id}:10:60") == {
        "key": "doc:{payload.id}", "seconds": 10.0, "max_wait_seconds": 60.0}
    assert _debounce("rebuild:5") == {"key": "rebuild", "seconds": 5.0}
