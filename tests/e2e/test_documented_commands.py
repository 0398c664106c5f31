"""Every shell command in README.md and the site's pages (docs/**/*.md) runs as written,
against a real ``leasehold dev`` this test starts: a documented example that fails, fails the
suite.

Commands come from fenced ``sh``, ``bash`` and ``console`` blocks (a new block or a new file
under docs/ is picked up as it is); one command may span lines (a ``\\`` at the end, an open
quote, a here-document). They run in document order, in one working folder per file, with the
``leasehold`` command of this checkout on ``PATH`` and ``LEASEHOLD_URL`` exported, and the
README's ``localhost:8080`` pointed at the runtime. Placeholders (``01J...``, ``JOB_ID``,
``SCHEDULE_ID``, ``<workflow_id>``) become a fresh job, schedule or workflow in the state the
command needs. A curl command fails on an HTTP error (``--fail-with-body``).

What cannot run here is listed in ``EXCEPTIONS``, each with its reason; a ``leasehold``
command among them is still parsed by the CLI's own argument parser, so an option or a
command that does not exist fails. So is every ``leasehold ...`` named in inline code.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shlex
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from leasehold.cli import parser

from .conftest import ROOT, Runtime, start_runtime

pytestmark = pytest.mark.e2e

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCES = ("sh", "bash", "console", "shell")

#: Commands that are not run, by a pattern, with why. A leasehold command here is parsed.
EXCEPTIONS: list[tuple[str, str]] = [
    (r"^make (test|soak|bench)\b", "runs the whole suite (the lead's `make test` runs it)"),
    (r"^make (dev|synth)\b",
     "make dev is a long-running runtime (the test starts one the same way); make synth "
     "bundles with pip for minutes (tests/infra synthesizes)"),
    (r"^make dist\b", "builds the packages: tests/e2e/test_init_venv.py builds them the same "
                       "way (python -m build) and installs them"),
    (r"^LEASEHOLD_TEST_ENDPOINT=", "runs the integration suite against another endpoint"),
    (r"(^|\s)(npx|aws|cdk)\s", "needs an AWS account"),
    (r"--aws-auth|execute-api\.|Client\(aws_auth=True\)|^export LEASEHOLD_URL=(https|<)",
     "needs an AWS account (a deployed stack's API)"),
    (r"^(\S*/)?leasehold (dev|worker|console)\b",
     "a long-running server: the test starts `leasehold dev` itself"),
    (r"^(\S*/)?leasehold events tail .*-f\b", "follows the log forever"),
    (r"python3 -m venv|^(\.venv/bin/python -m )?pytest\b|^cd \w+ && pytest",
     "a project's own virtualenv and tests: tests/e2e/test_init_venv.py builds and runs them"),
]

PLACEHOLDER = re.compile(r"01J\.\.\.|\bJOB_ID\b|\bSCHEDULE_ID\b|<workflow_id>")


@dataclass(frozen=True)
class Command:
    document: Path
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.document.name}:{self.line}: {self.text}"


def commands(document: Path) -> Iterator[Command]:
    """The shell commands of the fenced blocks of ``document``, in order."""
    lines = document.read_text().splitlines()
    inside = False
    pending: list[str] = []
    start = 0
    heredoc: str | None = None
    for number, line in enumerate(lines, 1):
        fence = line.strip()
        if fence.startswith("```"):
            inside = not inside and fence[3:].strip() in FENCES
            pending, heredoc = [], None
            continue
        if not inside:
            continue
        if heredoc is not None:
            pending.append(line)
            if line.strip() == heredoc:
                heredoc = None
                yield Command(document, start, "\n".join(pending))
                pending = []
            continue
        text = line[2:] if document.suffix == ".md" and line.startswith("$ ") else line
        if not pending:
            if not text.strip() or text.lstrip().startswith("#"):
                continue
            start = number
        pending.append(text)
        joined = "\n".join(pending)
        if (found := re.search(r"<<'?(\w+)'?", joined)) is not None:
            heredoc = found.group(1)
            continue
        if joined.endswith("\\") or not _complete(joined):
            continue
        yield Command(document, start, joined)
        pending = []


def _complete(text: str) -> bool:
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    return True


def exception(command: str) -> str | None:
    for pattern, reason in EXCEPTIONS:
        if re.search(pattern, command, re.MULTILINE):
            return reason
    return None


ALL = [command for document in DOCUMENTS for command in commands(document)]


def test_the_documents_have_commands_and_every_exception_is_used() -> None:
    assert len(ALL) > 50
    used = {pattern for pattern, _ in EXCEPTIONS
            if any(re.search(pattern, c.text, re.MULTILINE) for c in ALL)}
    assert used == {pattern for pattern, _ in EXCEPTIONS}, "an exception no command needs"


def cli_words(command: str) -> Iterator[list[str]]:
    """The argument lists of each ``leasehold`` invocation in ``command``."""
    text = command.split("<<")[0].replace("\\\n", " ")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words: list[str] = []
    redirected = False
    for token in [*lexer, ";"]:
        if token and set(token) <= set("<>&") and set(token) & set("<>"):
            redirected = True  # `> job.json`, `2>&1`: the shell's, not the command's
            if words and words[-1].isdigit():
                words.pop()
        elif redirected:
            redirected = False
        elif token and set(token) <= set(";&|"):
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # NAME=value before the command
            if words and Path(words[0]).name == "leasehold":
                yield words[1:]
            words = []
        else:
            words.append(token)


@functools.cache
def _checking_parser() -> tuple[argparse.ArgumentParser, list[str]]:
    """The CLI's parser, made to note its refusal instead of printing it and exiting."""
    root, failure = parser(), []

    def refuse(message: str) -> NoReturn:
        failure.append(message)
        raise SystemExit(2)

    for sub in [root, *_subparsers(root)]:
        sub.error = refuse  # type: ignore[method-assign]
    return root, failure


def parses(words: list[str]) -> str | None:
    """None if the CLI's parser takes ``words``, else what it says."""
    root, failure = _checking_parser()
    failure.clear()
    try:
        root.parse_args([PLACEHOLDER.sub("ID", word) for word in words])
    except SystemExit:
        return failure[0] if failure else "exited"
    return None


def _subparsers(root: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield sub
                yield from _subparsers(sub)


#: What an inline mention may leave out: its arguments' values (``leasehold init``,
#: ``--start-within SECONDS``). A command or an option that does not exist is never left out.
MENTION = re.compile(r"the following arguments are required|invalid \w+ value|expected one "
                     r"argument")


def test_every_leasehold_command_the_documents_name_parses() -> None:
    """Fenced commands (run or not) whole; inline ``leasehold ...`` code by its commands and
    options."""
    wrong = [f"{c}: {problem}" for c in ALL for words in cli_words(c.text)
             if (problem := parses(words)) is not None]
    named: list[tuple[str, list[str]]] = []
    for document in DOCUMENTS:
        text = document.read_text()
        for found in re.finditer(r"`(leasehold [^`]+)`", text):
            line = text.count("\n", 0, found.start()) + 1
            span = found.group(1)
            if "..." in span or span.endswith("COMMAND --help") or "COMMAND" in span:
                continue  # a pattern, not a command
            try:
                words = shlex.split(span)
            except ValueError:
                continue
            named.append((f"{document.name}:{line}: {span}", words[1:]))
    assert len(named) > 40
    wrong += [f"{where}: {problem}" for where, words in named
              if (problem := parses(words)) is not None and not MENTION.search(problem)]
    assert not wrong, "\n".join(wrong)


# -- running them ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The runtime's state and event log, where the commands look for them (as if they ran
    in the folder where `leasehold dev` runs)."""
    return tmp_path_factory.mktemp("state")


@pytest.fixture(scope="module")
def runtime(state_dir: Path) -> Iterator[Runtime]:
    started = start_runtime("--workers", "2", "--tasks",
                            "examples.tasks,examples.workflow_tasks",
                            # README's and docs/protocol.md's external pool
                            "--external", "images:resize,crop",
                            # leasehold dev's own lease (FAST's 2 s): docs/protocol.md's
                            # session by hand holds a lease across a process per step,
                            # which under load outlasted 2 s and the sweeper took it over
                            "--lease-seconds", "30",
                            # Its stop need not wait for the documents' jobs (a workflow's
                            # 30 s nap is still running): FAST's 10 s drain was the module's
                            # 17 s teardown, and nothing here reads what a drain finishes.
                            "--drain-seconds", "1",
                            env={"LEASEHOLD_STATE_DIR": str(state_dir)})
    yield started
    assert started.stop() == 0, "".join(started.output[-30:])


class State:
    """Fresh jobs, schedules and workflows for the placeholders, through the API."""

    def __init__(self, url: str) -> None:
        self.url = url

    def call(self, method: str, path: str, body: object = None) -> dict[str, object]:
        request = urllib.request.Request(
            self.url + path, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            result: dict[str, object] = json.loads(answer.read() or b"{}")
            return result

    def job(self, command: str) -> str:
        """A job a command can inspect, cancel, then retry: QUEUED (delayed); a
        command that only retries it gets it CANCELLED."""
        job_id = str(self.call("POST", "/jobs", {"task": "sleep", "payload": {"seconds": 1},
                                                "delay_seconds": 600})["job_id"])
        if "retry" in command and "cancel" not in command and "DELETE" not in command:
            self.call("DELETE", f"/jobs/{job_id}")
        return job_id

    def schedule(self) -> str:
        return str(self.call("POST", "/schedules", {"cron": "0 3 * * *", "task": "echo",
                                                    "payload": {}})["schedule_id"])

    def workflow(self) -> str:
        return str(self.call("POST", "/workflows", {"steps": [
            {"id": "nap", "task": "sleep", "payload": {"seconds": 30}}]})["workflow_id"])

    def fill(self, command: str) -> str:
        values = {"01J...": self.job, "JOB_ID": self.job, "SCHEDULE_ID": lambda _: self.schedule(),
                  "<workflow_id>": lambda _: self.workflow()}
        made: dict[str, str] = {}

        def one(found: re.Match[str]) -> str:
            name = found.group(0)
            if name not in made:  # one object per placeholder per command
                made[name] = values[name](command)
            return made[name]

        return PLACEHOLDER.sub(one, command)


@pytest.fixture(scope="module")
def shell(runtime: Runtime, state_dir: Path,
          tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment the commands run in: this checkout's ``leasehold`` on PATH."""
    bin_dir = tmp_path_factory.mktemp("bin")
    script = bin_dir / "leasehold"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -m leasehold.cli \"$@\"\n")
    script.chmod(0o755)
    python = bin_dir / "python"
    python.symlink_to(sys.executable)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT)]),
            "LEASEHOLD_URL": runtime.url, "LEASEHOLD_STATE_DIR": str(state_dir)}


def prepared(command: str, runtime: Runtime, state: State) -> str:
    port = runtime.url.rsplit(":", 1)[1].strip("/")
    text = re.sub(r"(localhost|127\.0\.0\.1):8080", f"127.0.0.1:{port}", command)
    text = re.sub(r"\bcurl -s\b", "curl -sS --fail-with-body", text)
    return state.fill(text)


RUNNABLE = [c for c in ALL if exception(c.text) is None]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.name)
def test_every_documented_command_runs(document: Path, runtime: Runtime,
                                       shell: dict[str, str], tmp_path: Path) -> None:
    state = State(runtime.url)
    failed = []
    for command in (c for c in RUNNABLE if c.document == document):
        text = prepared(command.text, runtime, state)
        try:
            done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=tmp_path,
                                  env=shell, capture_output=True, text=True, timeout=60,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            failed.append(f"{command}\n  timed out")
            continue
        if done.returncode != 0:
            failed.append(f"{command}\n  exit {done.returncode}: "
                          f"{(done.stderr or done.stdout).strip()[-800:]}")
    assert not failed, "\n".join(failed)
