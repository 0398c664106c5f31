"""A worker over HTTP (issue 34's protocol): the Python reference of a remote worker.

It runs tasks of an external pool (``PoolConfig(kind="external")``, ``leasehold dev
--external``) anywhere that reaches the API, with the standard library only::

    worker = RemoteWorker.from_env()          # LEASEHOLD_URL, LEASEHOLD_POOL, ...

    @worker.task("resize")
    def resize(payload, ctx):
        while not ctx.cancelled: ...          # a heartbeat said cancel, or the lease was lost
        return {"ok": True}

    worker.run()                              # until SIGTERM: in-flight jobs finish first

The protocol is docs/protocol.md (version 1). Leases are long polls (``POST
/workers/lease``); each job heartbeats in the background at a third of what is left of its
lease; a heartbeat answering 409 ``lease_lost`` (taken over, or past the attempt's
``timeout_at``) stops the job and nothing is reported; a heartbeat answering
``cancel_requested`` sets ``ctx.cancelled`` and nothing is reported either (that heartbeat
ended the job CANCELLED). A task that raises fails its attempt (retried by the job's policy;
:class:`NonRetryable`, or an exception whose ``retryable`` attribute is false, ends it DEAD);
a result the server refuses as too large (413) is reported as a non-retryable
``PayloadTooLarge`` failure.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

log = logging.getLogger(__name__)

Task = Callable[[Any, "RemoteContext"], Any]
#: The protocol version this worker speaks (docs/protocol.md), sent with each lease.
PROTOCOL = 1


class NonRetryable(Exception):
    """Raised by a task: its job ends DEAD at once, whatever its retry policy says."""


class LeaseLostError(Exception):
    """The server answered 409 lease_lost: another worker has the job now."""


@dataclass
class RemoteContext:
    job_id: str
    task: str
    tenant: str
    attempt: int
    worker_id: str
    deadline_at: str | None
    #: The W3C trace context the job was submitted in (None: none): a span of the job is
    #: its child (docs/protocol.md, "Trace context").
    traceparent: str | None = None
    tracestate: str | None = None
    _cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    #: Why the job should stop: "cancel requested" or "lease lost".
    reason: str = ""

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def wait_cancelled(self, timeout: float) -> bool:
        return self._cancel.wait(timeout)

    def stop(self, reason: str) -> None:
        if not self._cancel.is_set():
            self.reason = reason
            self._cancel.set()


class Misdirected(Exception):
    """The server answered 421 misdirected: this request belongs to the cell at
    ``home_url``."""

    def __init__(self, home_url: str) -> None:
        super().__init__(home_url)
        self.home_url = home_url


def _home_url(header: str | None, text: bytes) -> str | None:
    """The cell a 421 answer names: its ``Leasehold-Home-Url`` header, else the body's
    ``error.home_url``; only an http(s) URL."""
    home = header
    if not home:
        try:
            home = json.loads(text)["error"]["home_url"]
        except (ValueError, KeyError, TypeError):
            return None
    if not isinstance(home, str) or urllib.parse.urlsplit(home).scheme not in ("http",
                                                                                "https"):
        return None
    return home.rstrip("/")


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


class RemoteWorker:
    def __init__(self, url: str, pool: str, *, worker_id: str | None = None,
                 max_jobs: int = 4, wait_seconds: float = 20.0,
                 headers: dict[str, str] | None = None) -> None:
        self.url = url.rstrip("/")
        self.pool = pool
        self.worker_id = worker_id or f"py-{socket.gethostname()}-{os.getpid()}"
        self.max_jobs = max_jobs
        self.wait_seconds = wait_seconds
        self.headers = headers or {}
        self.tasks: dict[str, Task] = {}
        self.stopping = threading.Event()
        self._running: set[threading.Thread] = set()
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> RemoteWorker:
        env = os.environ
        return cls(env.get("LEASEHOLD_URL", "http://127.0.0.1:8080"),
                   env.get("LEASEHOLD_POOL", "default"),
                   worker_id=env.get("LEASEHOLD_WORKER_ID") or None,
                   max_jobs=int(env.get("LEASEHOLD_MAX_JOBS", "4")),
                   wait_seconds=float(env.get("LEASEHOLD_WAIT_SECONDS", "20")))

    def task(self, name: str) -> Callable[[Task], Task]:
        def register(fn: Task) -> Task:
            self.tasks[name] = fn
            return fn
        return register

    # -- HTTP ---------------------------------------------------------------------------

    def post(self, path: str, body: Any, timeout: float = 30.0) -> Any:
        """POST ``body`` to ``path``; a ``421 misdirected`` answer naming another cell's URL
        re-points this worker there (for this and every later request) and sends the
        request again there, once (docs/protocol.md, "Cells")."""
        try:
            return self._post(path, body, timeout)
        except Misdirected as exc:
            self.url = exc.home_url
            log.warning("the server sent this worker to %s (421 misdirected)", self.url)
            return self._post(path, body, timeout, follow=False)

    def _post(self, path: str, body: Any, timeout: float, *, follow: bool = True) -> Any:
        request = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json", **self.headers})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            text = exc.read()
            if exc.code == 409 and b"lease_lost" in text:
                raise LeaseLostError(path) from None
            home = _home_url(exc.headers.get("Leasehold-Home-Url"), text) \
                if exc.code == 421 and follow else None
            if home and home != self.url:
                raise Misdirected(home) from None
            raise

    # -- running ------------------------------------------------------------------------

    def run(self, *, handle_signals: bool = True, ready: Callable[[], None] | None = None
            ) -> None:
        """Lease and run jobs until :meth:`stop` (SIGTERM); then let in-flight jobs finish."""
        if handle_signals:
            signal.signal(signal.SIGTERM, lambda *_: self.stop())
            signal.signal(signal.SIGINT, lambda *_: self.stop())
        if ready is not None:
            ready()
        while not self.stopping.is_set():
            with self._lock:
                self._running = {t for t in self._running if t.is_alive()}
                free = self.max_jobs - len(self._running)
            if free <= 0:
                self.stopping.wait(0.05)
                continue
            try:
                answer = self.post("/workers/lease", {
                    "pool": self.pool, "tasks": sorted(self.tasks), "max_jobs": min(free, 10),
                    "wait_seconds": self.wait_seconds, "worker_id": self.worker_id,
                    "protocol": PROTOCOL},
                    timeout=self.wait_seconds + 30)
            except Exception:
                log.warning("lease failed; trying again", exc_info=True)
                self.stopping.wait(1.0)
                continue
            for job in answer["jobs"]:  # leased: ours to run, stopping or not
                thread = threading.Thread(target=self._run, args=(job,), daemon=True)
                with self._lock:
                    self._running.add(thread)
                thread.start()
        for thread in list(self._running):
            thread.join()

    def stop(self) -> None:
        self.stopping.set()

    def _run(self, job: dict[str, Any]) -> None:
        job_id, token = job["job_id"], job["lease"]["token"]
        ctx = RemoteContext(job_id=job_id, task=job["task"], tenant=job["tenant"],
                            attempt=int(job["attempt"]), worker_id=self.worker_id,
                            deadline_at=job.get("deadline_at"),
                            traceparent=job.get("traceparent"),
                            tracestate=job.get("tracestate"))
        done = threading.Event()
        beats = threading.Thread(target=self._beat, args=(job, ctx, done), daemon=True)
        beats.start()
        outcome: tuple[str, Any]
        try:
            fn = self.tasks[job["task"]]
            outcome = ("complete", {"token": token, "result": fn(job["payload"], ctx)})
        except Exception as exc:
            retryable = not isinstance(exc, NonRetryable) and getattr(exc, "retryable", True)
            outcome = ("fail", {"token": token, "retryable": bool(retryable),
                                "error": {"type": type(exc).__name__, "message": str(exc)}})
        finally:
            done.set()
        if ctx.cancelled:
            # Lost: another worker has it. Cancelled: the heartbeat that said so ended it.
            return
        path, body = outcome
        for tries in range(5):
            try:
                self.post(f"/jobs/{job_id}/{path}", body)
                return
            except LeaseLostError:
                return
            except urllib.error.HTTPError as exc:
                if exc.code == 413 and path == "complete":
                    # Over the limits: the attempt ends PayloadTooLarge, never retried.
                    path, body = "fail", {"token": token, "retryable": False, "error": {
                        "type": "PayloadTooLarge",
                        "message": "the result is over the server's limit (413)"}}
                    continue
                if exc.code < 500 and exc.code != 429:
                    log.warning("reporting %s refused (%s)", job_id, exc)
                    return
                log.warning("reporting %s failed (try %d)", job_id, tries + 1, exc_info=True)
                time.sleep(0.2 * 2 ** tries)
            except Exception:
                # A lost answer is safe to repeat: the server answers the finished job.
                log.warning("reporting %s failed (try %d)", job_id, tries + 1, exc_info=True)
                time.sleep(0.2 * 2 ** tries)

    def _beat(self, job: dict[str, Any], ctx: RemoteContext, done: threading.Event) -> None:
        expires = _epoch(job["lease"]["expires_at"])
        token = job["lease"]["token"]
        while True:
            interval = max(0.05, (expires - time.time()) / 3)
            if done.wait(interval):
                return
            try:
                answer = self.post(f"/jobs/{job['job_id']}/heartbeat", {"token": token},
                                   timeout=max(1.0, expires - time.time()))
            except LeaseLostError:
                ctx.stop("lease lost")
                return
            except Exception:
                log.warning("heartbeat of %s failed", job["job_id"], exc_info=True)
                if time.time() >= expires:
                    ctx.stop("lease lost")
                    return
                continue
            expires = _epoch(answer["expires_at"])
            if answer["cancel_requested"]:
                ctx.stop("cancel requested")


__all__ = ["LeaseLostError", "NonRetryable", "RemoteContext", "RemoteWorker"]
