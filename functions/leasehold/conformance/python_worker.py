"""The conformance task set (docs/protocol.md, "The conformance task set") on the Python
reference worker (``leasehold.client.worker``).

Run it as ``python -m leasehold.conformance.python_worker`` with ``LEASEHOLD_URL``,
``LEASEHOLD_POOL``, ``LEASEHOLD_WORKER_ID``, ``LEASEHOLD_MAX_JOBS``,
``LEASEHOLD_WAIT_SECONDS``. Prints ``ready`` once it polls; SIGTERM drains and exits 0.
``leasehold conformance --worker "python -m leasehold.conformance.python_worker"``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from leasehold.client.worker import RemoteContext, RemoteWorker

LANG = "python"


def log_line(payload: Any, event: str, ctx: RemoteContext) -> None:
    path = payload.get("log") if isinstance(payload, dict) else None
    if path:
        line = f"{event} {ctx.job_id} {LANG} {ctx.worker_id} {int(time.time() * 1000)}\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


class ConformanceError(Exception):
    pass




def build(worker: RemoteWorker) -> RemoteWorker:
    @worker.task("conformance.echo")
    def echo(payload: Any, ctx: RemoteContext) -> Any:
        log_line(payload, "start", ctx)
        return {"echo": payload, "language": LANG, "worker_id": ctx.worker_id,
                "attempt": ctx.attempt, "traceparent": ctx.traceparent,
                "tracestate": ctx.tracestate}

    @worker.task("conformance.fail")
    def fail(payload: Any, ctx: RemoteContext) -> Any:
        payload = payload if isinstance(payload, dict) else {}
        succeed_on = payload.get("succeed_on_attempt")
        if succeed_on is not None and ctx.attempt >= int(succeed_on):
            return {"attempt": ctx.attempt, "language": LANG}
        message = payload.get("message") or "boom"
        error = ConformanceError(message)
        error.retryable = bool(payload.get("retryable", True))  # type: ignore[attr-defined]
        raise error

    @worker.task("conformance.sleep")
    def sleep(payload: Any, ctx: RemoteContext) -> Any:
        seconds = float(payload.get("seconds", 0))
        log_line(payload, "start", ctx)
        ends = time.monotonic() + seconds
        while (left := ends - time.monotonic()) > 0:
            if ctx.wait_cancelled(min(0.1, left)):
                log_line(payload, "cancelled", ctx)
                return None
        log_line(payload, "end", ctx)
        return {"slept": seconds, "language": LANG, "worker_id": ctx.worker_id}

    return worker


def main() -> None:
    worker = build(RemoteWorker.from_env())
    worker.run(ready=lambda: print("ready", flush=True))


if __name__ == "__main__":
    main()
