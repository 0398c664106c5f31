"""The emulator's HTTP server: werkzeug's, as moto runs it, without its per-request waste.

Profiled with py-spy while 8 clients sent ``POST /jobs`` (issue 32's throughput against
Celery), moto's own DynamoDB work was under a fifth of the emulator's samples. Three things
around it cost more:

* werkzeug logged every request to stderr, which the runtime reads only to drop it (15%):
  :func:`make_server` leaves werkzeug's errors on and its request lines off;
* moto's dispatcher looked for each request's backend by listing moto's package directory
  (10%): :class:`Dispatcher` remembers the answer for a host, which never changes;
* werkzeug closes every connection (``Connection: close``), so every SDK call opened a TCP
  connection and the server started a thread for it: :class:`KeepAliveHandler` keeps
  HTTP/1.1 connections open, as AWS's endpoints do.

werkzeug closes connections because ``http.server`` cannot tell where an unread request body
ends. :class:`KeepAliveHandler` reads each body whole before the application sees it (the SDKs
send ``Content-Length``; a chunked request still closes its connection), so the next request
starts where it should whatever the application read. It also no longer waits 10 ms after
each answer for request bytes to discard, as werkzeug's handler did.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler
from werkzeug.serving import BaseWSGIServer
from werkzeug.serving import make_server as werkzeug_server

from leasehold.local.gateway import end_with

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

#: How long a kept connection may sit idle before the server closes it (SDKs check a pooled
#: connection before they reuse it, and open a new one when it was closed).
IDLE_SECONDS = 120.0


class Dispatcher(DomainDispatcherApplication):
    """moto's dispatcher, remembering which backend answers a host."""

    def __init__(self, create_app: Callable[..., Any]) -> None:
        super().__init__(create_app)
        self._backends: dict[str | None, Any] = {}

    def get_backend_for_host(self, host: str | None) -> Any:
        # Called under the dispatcher's own lock.
        if host not in self._backends:
            self._backends[host] = super().get_backend_for_host(host)
        return self._backends[host]


class KeepAliveHandler(MotoRequestHandler):
    """moto's request handler, answering each request whole and keeping its connection open.

    werkzeug's own ``run_wsgi`` ends every response by reading the socket for 10 ms to
    discard an unread body, which would eat the next request on a kept connection. Here the
    body is read whole before the application sees it, and the answer is sent whole with its
    ``Content-Length`` (the emulator's answers are small; :class:`~leasehold.local.emulator.
    AtomicRequests` already drains them to a list)."""

    timeout = IDLE_SECONDS

    def make_environ(self) -> dict[str, Any]:
        environ = super().make_environ()
        if "HTTP_TRANSFER_ENCODING" in environ:
            self.close_connection = True  # where a chunked body ends is werkzeug's to find
        else:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            environ["wsgi.input"] = io.BytesIO(self.rfile.read(length) if length else b"")
        return environ

    def run_wsgi(self) -> None:
        if self.headers.get("Expect", "").lower().strip() == "100-continue":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        environ = self.make_environ()
        chunks: list[bytes] = []
        started: list[tuple[str, list[tuple[str, str]]]] = []

        def start_response(status: str, headers: list[tuple[str, str]],
                           exc_info: Any = None) -> Callable[[bytes], None]:
            started[:] = [(status, headers)]
            return chunks.append

        try:
            answer = self.server.app(environ, start_response)
            try:
                chunks.extend(answer)
            finally:
                if hasattr(answer, "close"):
                    answer.close()
            status, headers = started[0]
        except Exception:
            logging.getLogger("werkzeug").exception("Error on request %s %s",
                                                    self.command, self.path)
            self.close_connection = True
            chunks[:] = [b"Internal Server Error"]
            status, headers = "500 INTERNAL SERVER ERROR", [("Content-Type", "text/plain")]
        code, _, reason = status.partition(" ")
        body = b"".join(chunks)
        self.send_response(int(code), reason)
        for name, value in headers:
            if name.lower() not in _FRAMING:
                self.send_header(name, value)
        if int(code) not in (204, 304) and not 100 <= int(code) < 200:
            self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        end_with(self, body)


#: Headers the handler sets itself, from the answer it sends.
_FRAMING = frozenset({"content-length", "transfer-encoding", "connection"})


def make_server(host: str, port: int, app: WSGIApp) -> BaseWSGIServer:
    """A threaded server for ``app`` on ``host:port`` (0: any free port), keeping connections
    alive and logging only errors."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    return werkzeug_server(host, port, app, threaded=True, request_handler=KeepAliveHandler)
