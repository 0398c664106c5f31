"""The Python reference worker (``leasehold.client.worker``) against a fake server: what it
sends after a cancel, and on a 413 (docs/protocol.md, "Cancellation" and "Sizes")."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from leasehold.client.worker import RemoteContext, RemoteWorker

Answer = tuple[int, Any]


class Fake(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, answer: Callable[[str, Any], Answer]) -> None:
        self.answer = answer
        self.requests: list[tuple[str, Any]] = []
        #: A cell that is not the worker's: every request answered 421 naming this URL.
        self.home: str | None = None
        self.jobs = [{"job_id": "j1", "task": "t", "payload": {}, "attempt": 1,
                      "tenant": "acme", "deadline_at": None, "timeout_at": None,
                      "lease": {"token": "tok", "expires_at": _at(0.3)}}]
        super().__init__(("127.0.0.1", 0), _Handler)

    def named(self, suffix: str) -> list[Any]:
        return [body for path, body in self.requests if path.endswith(suffix)]


def _at(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


class _Handler(BaseHTTPRequestHandler):
    server: Fake

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, body))
        if self.server.home is not None:
            data = json.dumps({"error": {"code": "misdirected", "message": "elsewhere",
                                         "field": None, "home": "us-east-2",
                                         "home_url": self.server.home}}).encode()
            self.send_response(421)
            self.send_header("Leasehold-Home-Url", self.server.home)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if self.path == "/workers/lease":
            jobs, self.server.jobs = self.server.jobs, []
            status, answer = 200, {"jobs": jobs, "protocol": 1}
        else:
            status, answer = self.server.answer(self.path, body)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[str, Any], Answer]], Fake]]:
    started: list[Fake] = []

    def start(answer: Callable[[str, Any], Answer]) -> Fake:
        fake = Fake(answer)
        threading.Thread(target=fake.serve_forever, daemon=True).start()
        started.append(fake)
        return fake

    yield start
    for fake in started:
        fake.shutdown()
        fake.server_close()


def run_until(worker: RemoteWorker, done: Callable[[], bool]) -> None:
    runner = threading.Thread(target=worker.run, kwargs={"handle_signals": False}, daemon=True)
    runner.start()
    deadline = time.monotonic() + 10
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)
    worker.stop()
    runner.join(10)
    assert done()


def test_a_cancel_seen_on_a_heartbeat_is_not_reported(serve: Any) -> None:
    fake = serve(lambda path, body: (200, {"expires_at": _at(0.3), "cancel_requested": True}))
    worker = RemoteWorker(f"http://127.0.0.1:{fake.server_port}", "p",
                          worker_id="w", max_jobs=1, wait_seconds=0.1)
    seen: list[str] = []

    @worker.task("t")
    def task(payload: Any, ctx: RemoteContext) -> Any:
        ctx.wait_cancelled(5)
        seen.append(ctx.reason)
        return "finished anyway"

    run_until(worker, lambda: bool(seen))
    time.sleep(0.3)  # room for a wrongly sent finish to arrive before looking
    assert seen == ["cancel requested"]
    assert fake.named("/complete") == [] and fake.named("/fail") == []
    assert fake.named("/workers/lease")[0]["protocol"] == 1


def test_a_result_refused_as_too_large_is_reported_as_payload_too_large(serve: Any) -> None:
    def answer(path: str, body: Any) -> Answer:
        if path.endswith("/complete"):
            return 413, {"error": {"code": "payload_too_large", "message": "too large",
                                   "field": None}}
        return 200, {"expires_at": _at(30), "cancel_requested": False}

    fake = serve(answer)
    worker = RemoteWorker(f"http://127.0.0.1:{fake.server_port}", "p", worker_id="w",
                          max_jobs=1, wait_seconds=0.1)
    worker.task("t")(lambda payload, ctx: "x" * 1000)
    run_until(worker, lambda: bool(fake.named("/fail")))
    assert len(fake.named("/complete")) == 1  # not repeated five times
    assert fake.named("/fail") == [{"token": "tok", "retryable": False, "error": {
        "type": "PayloadTooLarge", "message": "the result is over the server's limit (413)"}}]


def test_a_421_re_points_the_worker_to_the_cell_it_names(serve: Any) -> None:
    home = serve(lambda path, body: (200, {"expires_at": _at(30), "cancel_requested": False}))
    elsewhere = serve(lambda path, body: (500, {}))
    elsewhere.home = f"http://127.0.0.1:{home.server_port}/"
    worker = RemoteWorker(f"http://127.0.0.1:{elsewhere.server_port}", "p", worker_id="w",
                          max_jobs=1, wait_seconds=0.1)
    worker.task("t")(lambda payload, ctx: "done")
    run_until(worker, lambda: bool(home.named("/complete")))
    # The lease was sent again to the home, which leased the job; its finish went there.
    assert [path for path, _ in elsewhere.requests] == ["/workers/lease"]
    assert home.named("/workers/lease")[0]["pool"] == "p"
    assert home.named("/complete") == [{"token": "tok", "result": "done"}]
    assert worker.url == f"http://127.0.0.1:{home.server_port}"
