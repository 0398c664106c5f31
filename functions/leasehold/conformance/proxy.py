"""A proxy between the worker under test and the server that loses answers: the request
reaches the server, and the worker's connection is closed before the answer (what a dropped
connection or a gateway timeout does). A conforming worker sends the finish again."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LosingProxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, target: str, *, lose: str, times: int = 1) -> None:
        self.target = target.rstrip("/")
        #: The path ending whose answers are lost (``/complete``), and how many.
        self.lose = lose
        self.left = times
        self.lost: list[str] = []
        #: (path, status) of every answer that reached the worker.
        self.answered: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Forward)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.shutdown()
        self.server_close()

    def losing(self, path: str) -> bool:
        with self.lock:
            if path.endswith(self.lose) and self.left > 0:
                self.left -= 1
                self.lost.append(path)
                return True
        return False


class _Forward(BaseHTTPRequestHandler):
    server: LosingProxy
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self._forward("POST")

    def do_GET(self) -> None:
        self._forward("GET")

    def _forward(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items()
                   if k.lower() not in ("host", "content-length", "connection")}
        request = urllib.request.Request(self.server.target + self.path, data=body,
                                         headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                status, data, kind = answer.status, answer.read(), answer.headers
        except urllib.error.HTTPError as exc:
            status, data, kind = exc.code, exc.read(), exc.headers
        if self.server.losing(self.path):
            self.close_connection = True  # the server acted; the worker never hears of it
            return
        self.server.answered.append((self.path, status))
        self.send_response(status)
        self.send_header("Content-Type", kind.get("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


__all__ = ["LosingProxy"]
