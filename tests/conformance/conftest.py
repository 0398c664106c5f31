"""The conformance suite's runtime and workers (docs/protocol.md, "The conformance task set").

One ``leasehold dev`` per module with the conformance tasks external in pool ``conf``; each
worker is its language's reference worker, started as docs/protocol.md says. A language whose
command is not there fails (never skips): the suite is what says a worker conforms.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e.conftest import Runtime, start_runtime

ROOT = Path(__file__).parents[2]
POOL = "conf"
TASKS = "conformance.echo,conformance.fail,conformance.sleep"
#: How each language's reference worker is started (from the repository root), and what
#: must exist first (a built file); docs/protocol.md, "Starting", says what it is given.
COMMANDS: dict[str, tuple[list[str], Path | None]] = {
    "python": ([sys.executable, "-m", "tests.conformance.python_worker"], None),
    "typescript": (["node", "workers/typescript/dist/conformance.js"],
                   ROOT / "workers/typescript/dist/conformance.js"),
    "java": (["java", "-cp", "workers/java/build", "leasehold.Conformance"],
             ROOT / "workers/java/build"),
}
#: A fourth language: its command (``LEASEHOLD_CONFORMANCE_COMMAND="./my-worker --flag"``).
EXTRA = os.environ.get("LEASEHOLD_CONFORMANCE_COMMAND", "")
REFERENCE = ("python", "typescript", "java")
LANGUAGES = [*REFERENCE, *(["custom"] if EXTRA else [])]


def command_for(language: str) -> list[str]:
    if language == "custom":
        return shlex.split(EXTRA)
    command, needs = COMMANDS[language]
    if needs is not None and not needs.exists():
        build = {"typescript": "cd workers/typescript && npm run build",
                 "java": "workers/java/build.sh"}[language]
        pytest.fail(f"the {language} reference worker is not built: {needs} is missing "
                    f"(build it with `{build}`); its conformance cannot be checked")
    return command


@dataclass
class Worker:
    language: str
    worker_id: str
    process: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)

    def signal(self, sig: int) -> None:
        self.process.send_signal(sig)

    def stop(self, timeout: float = 20) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


class Workers:
    """Starts workers for one test and stops every one of them after it."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.started: list[Worker] = []

    def start(self, language: str, *, max_jobs: int = 4, wait_seconds: float = 1) -> Worker:
        worker_id = f"{language}-{len(self.started) + 1}-{os.getpid()}"
        env = {**os.environ, "LEASEHOLD_URL": self.runtime.url, "LEASEHOLD_POOL": POOL,
               "LEASEHOLD_WORKER_ID": worker_id, "LEASEHOLD_MAX_JOBS": str(max_jobs),
               "LEASEHOLD_WAIT_SECONDS": f"{wait_seconds:g}",
               "PYTHONPATH": os.pathsep.join([str(ROOT / "functions"), str(ROOT)])}
        process = subprocess.Popen(command_for(language), cwd=ROOT, env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        worker = Worker(language, worker_id, process)
        self.started.append(worker)
        ready = threading.Event()

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                worker.output.append(line)
                if line.strip() == "ready":
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(30):
            worker.stop()
            pytest.fail(f"the {language} worker did not print `ready` within 30 s:\n"
                        + "".join(worker.output[-40:]))
        return worker

    def stop_all(self) -> None:
        for worker in self.started:  # all at once: each drains its last long poll
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGCONT)
                worker.process.terminate()
        for worker in self.started:
            worker.stop()


@pytest.fixture(scope="module")
def runtime() -> Iterator[Runtime]:
    started = start_runtime("--workers", "0", "--external", f"{POOL}:{TASKS}",
                            "--lease-seconds", "2", "--in-memory")
    yield started
    started.stop()


@pytest.fixture
def workers(runtime: Runtime) -> Iterator[Workers]:
    started = Workers(runtime)
    yield started
    started.stop_all()


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "conformance.log"


def lines(path: Path) -> list[list[str]]:
    """The log's lines, each ``[event, job_id, language, worker_id, epoch_ms]``."""
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


def wait_until(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
