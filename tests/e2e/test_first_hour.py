"""What a new user meets in the first hour, against a real ``leasehold dev``: the shell
examples of the README and of the site's first-hour pages run as written, and the CLI's
answers.

Every ``sh`` block of README.md, then of :data:`FIRST_HOUR` (the pages that were the README's
sections before "Deploy to AWS"), is read and each command is run in order, in bash, with
``leasehold`` as this interpreter's CLI and the runtime's port for 8080.
The README's placeholders are what a reader would paste: ``01J...`` the newest job,
``SCHEDULE_ID`` the newest schedule, ``<workflow_id>`` the newest workflow. A command passes
when it exits 0 and, if it answers JSON, the answer is not an error. The few lines that cannot
run here are listed with the reason.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasehold.cli import main

from .conftest import ROOT, Runtime, start_runtime

pytestmark = pytest.mark.e2e

#: The site's pages a new user reads before deploying, in reading order.
FIRST_HOUR = [ROOT / "README.md", ROOT / "docs" / "quickstart.md",
              *(ROOT / "docs" / "guides" / f"{page}.md" for page in (
                  "local", "console", "tasks", "schedules", "workflows", "flow-control",
                  "durable", "versions", "targets", "workers", "traces", "testing"))]


def first_hour() -> str:
    return "\n".join(page.read_text() for page in FIRST_HOUR)

#: Lines this test does not run, each with why (the runtime itself is started by the test).
SKIPPED = {
    "make dev": "starts the runtime (the test has started one)",
    "make test": "runs this test",
    "make dist": "builds the packages (tests/e2e/test_init_venv.py builds and installs them)",
    "leasehold dev": "starts the runtime (the test has started one)",
    "leasehold worker": "runs until stopped",
    "leasehold events tail -f": "follows until stopped",
    "--aws-auth": "needs an AWS account",
}


def examples(readme: str) -> list[str]:
    """The commands of the ``sh`` blocks of ``readme`` (the first-hour pages), one per entry:
    continuation lines, quotes left open and here-documents joined, comments dropped."""
    text = readme
    commands: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        pending: list[str] = []
        heredoc: str | None = None
        for line in block.splitlines():
            if heredoc is None and not pending and (not line.strip() or line.startswith("#")):
                continue
            pending.append(line)
            if heredoc is not None:
                if line.strip() == heredoc:
                    heredoc = None
                else:
                    continue
            elif (marker := re.search(r"<<'?(\w+)'?", line)) is not None:
                heredoc = marker.group(1)
                continue
            joined = "\n".join(pending)
            if joined.endswith("\\") or not complete(joined):
                continue
            commands.append(joined)
            pending = []
        assert not pending, f"unfinished command in the README: {pending}"
    return commands


def complete(command: str) -> bool:
    """Whether the shell would run ``command`` as it is (no quote left open)."""
    try:
        shlex.split(command, comments=True)
    except ValueError:
        return False
    return True


def skipped(command: str) -> str | None:
    for start, reason in SKIPPED.items():
        if command.startswith(start) or (start.startswith("--") and start in command):
            return reason
    return None


def newest(runtime: Runtime, path: str, key: str, listing: str) -> str:
    found = runtime.call("GET", f"{path}?limit=1").body[listing]
    assert found, f"the README uses a {key} before it made one"
    value: str = found[0][key]
    return value


def placeholders(runtime: Runtime, command: str) -> str:
    if "01J..." in command:
        command = command.replace("01J...", newest(runtime, "/jobs", "job_id", "jobs"))
    if "SCHEDULE_ID" in command:
        command = command.replace("SCHEDULE_ID", newest(runtime, "/schedules", "schedule_id",
                                                        "schedules"))
    if "<workflow_id>" in command:
        command = command.replace("<workflow_id>", newest(runtime, "/workflows", "workflow_id",
                                                          "workflows"))
    return command


def answers(output: str) -> Iterator[object]:
    """Each JSON document curl printed (they follow each other without separators)."""
    decoder = json.JSONDecoder()
    position = 0
    while position < len(output):
        if output[position].isspace():
            position += 1
            continue
        value, position = decoder.raw_decode(output, position)
        yield value


@pytest.fixture(scope="module")
def readme_runtime() -> Iterator[Runtime]:
    # As the workflow section says to start it, with the external tasks the "Workers in any
    # language" section declares; a short lookahead keeps the every-2-seconds schedule from
    # handing off 45 runs that its update and pause must then cancel.
    started = start_runtime("--tasks", "examples.tasks,examples.workflow_tasks",
                            "--external", "images:resize,crop", "--lookahead-seconds", "5")
    yield started
    assert started.stop() == 0, "".join(started.output[-30:])


def test_the_readmes_shell_examples_run_as_written(readme_runtime: Runtime,
                                                   tmp_path: Path) -> None:
    runtime = readme_runtime
    port = runtime.url.rsplit(":", 1)[1]
    cli = f"{shlex.quote(sys.executable)} -m leasehold.cli"
    # `events tail` reads the log where `leasehold dev` runs; this runtime keeps it elsewhere.
    log = next(x for x in runtime.output if x.strip().startswith("events:")).split()[1]
    env = {**os.environ, "LEASEHOLD_URL": runtime.url, "LEASEHOLD_EVENT_LOG": log}
    commands = examples(first_hour())
    ran = 0
    for command in commands:
        if skipped(command):
            continue
        line = placeholders(runtime, command)
        line = re.sub(r"(localhost|127\.0\.0\.1):8080", f"127.0.0.1:{port}", line)
        script = f"set -e -o pipefail\nleasehold() {{ {cli} \"$@\"; }}\n{line}\n"
        done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        if command.startswith("curl"):
            for answer in answers(done.stdout):
                assert not (isinstance(answer, dict) and "error" in answer
                            and isinstance(answer["error"], dict)), (command, answer)
        ran += 1
    assert ran >= 30, f"only {ran} of {len(commands)} README commands ran"
    # What the examples did shows in the runtime: the scheduled report, the workflow, ...
    schedules = runtime.call("GET", "/schedules?limit=50").body["schedules"]
    assert {s.get("task") for s in schedules} >= {"report", "ping"}
    assert runtime.call("GET", "/workflows?state=SUCCEEDED").body["workflows"]
    assert runtime.call("GET", "/triggers").body["triggers"]


def test_every_skipped_line_is_one_the_readme_still_has() -> None:
    commands = examples(first_hour())
    for start in SKIPPED:
        assert any(skipped(c) and (c.startswith(start) or start in c) for c in commands), start


def test_the_runtime_of_the_suite_keeps_its_state_outside_the_repository(
        readme_runtime: Runtime) -> None:
    for name in ("events", "state"):
        line = next(x for x in readme_runtime.output if x.strip().startswith(f"{name}:"))
        assert str(ROOT / ".leasehold") not in line, line


# -- the CLI's answers against the same runtime (in this process: no interpreter per command) --

def cli(runtime: Runtime, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main([*argv, "--url", runtime.url, "--tenant", "first-hour"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return code, captured.out


def test_cancel_of_a_running_job_says_the_cancel_was_requested(
        readme_runtime: Runtime, capsys: pytest.CaptureFixture[str]) -> None:
    job_id = readme_runtime.submit({"task": "sleep", "payload": {"seconds": 30}},
                                   tenant="first-hour")["job_id"]
    readme_runtime.wait_for([job_id], {"RUNNING"}, tenant="first-hour")
    _, out = cli(readme_runtime, capsys, "cancel", job_id)
    assert out.startswith(f"cancel requested for {job_id}: it is RUNNING and stops at its next "
                          "heartbeat")
    final = readme_runtime.wait_for([job_id], tenant="first-hour")[job_id]
    assert final["state"] == "CANCELLED"


def test_a_run_at_in_the_past_is_run_now_and_the_cli_says_so(
        readme_runtime: Runtime, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = cli(readme_runtime, capsys, "submit", "echo", '"late"', "--run-at",
                 "2020-01-01T00:00:00Z", "--wait")
    assert "SUCCEEDED" in out
    assert ("warning       run_at 2020-01-01T00:00:00.000Z is in the past; the job runs now"
            in out.splitlines())


def test_workers_triggers_and_schedules_print_tables(
        readme_runtime: Runtime, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = cli(readme_runtime, capsys, "workers")
    lines = out.splitlines()
    assert lines[0].split() == ["WORKER", "POOL", "HOST:PID", "HEARTBEAT", "PROCESSED",
                                "RUNNING"]
    assert len(lines) == 3 and all(" default " in line for line in lines[1:])  # 2 workers

    _, out = cli(readme_runtime, capsys, "triggers", "create", "--pattern",
                 '{"source": ["shop"]}', "--task", "echo", "--input-path", "$.detail")
    trigger_id = out.split()[1]
    _, listed = cli(readme_runtime, capsys, "triggers", "list")
    assert listed.splitlines()[0].startswith("TRIGGER") and trigger_id in listed
    _, shown = cli(readme_runtime, capsys, "triggers", "get", trigger_id)
    assert "the event at $.detail" in shown
    _, gone = cli(readme_runtime, capsys, "triggers", "delete", trigger_id)
    assert gone.strip() == f"deleted {trigger_id}"

    _, out = cli(readme_runtime, capsys, "schedules", "create", "--cron", "*/2 * * * * *",
                 "--task", "ping")
    schedule_id = out.split()[1]
    _, listed = cli(readme_runtime, capsys, "schedules", "list")
    assert listed.splitlines()[0].split()[:3] == ["SCHEDULE", "NAME", "STATE"]
    assert schedule_id in listed and "{" not in listed  # a table, not JSON


def test_a_seconds_schedules_future_runs_say_when_they_are_due(
        readme_runtime: Runtime, capsys: pytest.CaptureFixture[str]) -> None:
    created = readme_runtime.call("POST", "/schedules", {"cron": "*/2 * * * * *",
                                                         "task": "ping"}, tenant="first-hour")
    schedule_id = created.body["schedule_id"]
    deadline = time.monotonic() + 20
    while True:  # the ticker hands the next runs off within a tick or two
        page = readme_runtime.call("GET", f"/jobs?schedule_id={schedule_id}",
                                   tenant="first-hour").body["jobs"]
        waiting = [j for j in page if j["state"] == "QUEUED" and j["due_in_seconds"]]
        if waiting or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert waiting, page
    assert all(0 < j["due_in_seconds"] <= 6 for j in waiting)
    _, out = cli(readme_runtime, capsys, "schedules", "jobs", schedule_id)
    assert re.search(r"QUEUED, due in \d+(\.\d)? s", out), out
    readme_runtime.call("DELETE", f"/schedules/{schedule_id}", tenant="first-hour")
