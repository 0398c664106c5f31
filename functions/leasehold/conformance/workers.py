"""The worker processes a case starts: the command under test, given the standard
environment (docs/protocol.md, "Starting"), read until it prints ``ready``."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from leasehold.conformance.server import POOL, CaseFailed, Server

#: How long a worker may take to print ``ready``.
READY_SECONDS = 30.0


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
    """Starts workers of one command for one case, and stops every one of them after it."""

    def __init__(self, server: Server, command: Sequence[str], language: str,
                 *, cwd: str | None = None, env: dict[str, str] | None = None) -> None:
        self.server = server
        self.command = list(command)
        self.language = language
        self.cwd = cwd
        self.env = env or {}
        self.started: list[Worker] = []

    def start(self, *, max_jobs: int = 4, wait_seconds: float = 1,
              url: str | None = None) -> Worker:
        """A worker of the command, ready; ``url``: another address of the server (a
        proxy)."""
        worker_id = f"{self.language}-{len(self.started) + 1}-{os.getpid()}"
        env = {**os.environ, **self.env, "LEASEHOLD_URL": url or self.server.url,
               "LEASEHOLD_POOL": POOL, "LEASEHOLD_WORKER_ID": worker_id,
               "LEASEHOLD_MAX_JOBS": str(max_jobs),
               "LEASEHOLD_WAIT_SECONDS": f"{wait_seconds:g}"}
        process = subprocess.Popen(self.command, cwd=self.cwd, env=env, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        worker = Worker(self.language, worker_id, process)
        self.started.append(worker)
        ready = threading.Event()

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                worker.output.append(line)
                if line.strip() == "ready":
                    ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(READY_SECONDS):
            worker.stop()
            raise CaseFailed(f"the worker did not print `ready` within {READY_SECONDS:g} s:\n"
                             + "".join(worker.output[-40:]))
        return worker

    def stop_all(self) -> None:
        for worker in self.started:  # all at once: each drains its last long poll
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGCONT)
                worker.process.terminate()
        for worker in self.started:
            worker.stop()


__all__ = ["Worker", "Workers"]
