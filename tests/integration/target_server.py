"""A local HTTP server for HTTP target tests: it records every request, answers from a
script, and counts the requests in flight at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: (status, headers, body) the server answers; a callable answer may sleep first (a hung
#: server) or hold the request while a test counts.
Answer = tuple[int, dict[str, str], bytes]


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Server:
    url: str
    requests: list[Request] = field(default_factory=list)
    answers: list[Answer | Callable[[Request], Answer]] = field(default_factory=list)
    default: Answer | Callable[[Request], Answer] = (
        200, {"Content-Type": "application/json"}, b'{"ok": true}')
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, request: Request) -> Answer:
        with self.lock:
            self.requests.append(request)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            scripted = self.answers.pop(0) if self.answers else self.default
        try:
            return scripted(request) if callable(scripted) else scripted
        finally:
            with self.lock:
                self.in_flight -= 1


def serve(host: str = "127.0.0.1") -> Iterator[Server]:
    """Start a threaded server on a free port; stop it when the generator is closed."""
    holder: dict[str, Server] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = Request(self.command, self.path, {k: v for k, v in self.headers.items()},
                              self.rfile.read(length), time.monotonic())
            status, headers, body = holder["server"].answer(request)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _any

        def log_message(self, format: str, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer((host, 0), Handler)
    httpd.daemon_threads = True
    holder["server"] = Server(url=f"http://{host}:{httpd.server_address[1]}")
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder["server"]
    finally:
        httpd.shutdown()
        httpd.server_close()
