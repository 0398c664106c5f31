"""A local HTTP server for HTTP target tests: it records every request, answers from a
script, and counts the requests in flight at once (a request is in flight until its answer
is written or its client has gone).

:func:`loopback_only` is the network guard of these tests: a fake resolver maps the names
a test uses to loopback, and any connect to another address fails the test.
"""

from __future__ import annotations

import ipaddress
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass(frozen=True)
class Trickle:
    """A raw answer: ``head`` written at once, then ``raw`` a byte every ``every`` seconds,
    until it is all written or the client has closed the connection."""

    raw: bytes
    every: float = 0.25
    head: bytes = b""


#: (status, headers, body) the server answers, or a trickled raw answer; a callable answer
#: may sleep first (a hung server) or hold the request while a test counts.
Answer = tuple[int, dict[str, str], bytes] | Trickle


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

    def arrived(self, request: Request) -> Answer:
        with self.lock:
            self.requests.append(request)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            scripted = self.answers.pop(0) if self.answers else self.default
        return scripted(request) if callable(scripted) else scripted

    def ended(self) -> None:
        with self.lock:
            self.in_flight -= 1


def _trickle(connection: socket.socket, answer: Trickle) -> None:
    try:
        connection.sendall(answer.head)
    except OSError:
        return
    for index in range(len(answer.raw)):
        try:
            connection.sendall(answer.raw[index:index + 1])
        except OSError:
            return
        # Wait the interval, but end at once when the client closes (it reads as EOF).
        readable, _, _ = select.select([connection], [], [], answer.every)
        if readable:
            try:
                if not connection.recv(1, socket.MSG_PEEK):
                    return
            except OSError:
                return


def serve(host: str = "127.0.0.1") -> Iterator[Server]:
    """Start a threaded server on a free port; stop it when the generator is closed."""
    holder: dict[str, Server] = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = Request(self.command, self.path, {k: v for k, v in self.headers.items()},
                              self.rfile.read(length), time.monotonic())
            server = holder["server"]
            try:
                answer = server.arrived(request)
                if isinstance(answer, Trickle):
                    _trickle(self.connection, answer)
                    self.close_connection = True
                    return
                status, headers, body = answer
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
            finally:
                server.ended()

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


@dataclass
class Network:
    """What :func:`loopback_only` saw: the names it answered, and every connect refused."""

    names: dict[str, str]
    refused: list[Any] = field(default_factory=list)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def loopback_only(monkeypatch: pytest.MonkeyPatch,
                  names: Mapping[str, str] | None = None) -> Network:
    """Resolve ``names`` (host -> loopback address) and ``localhost`` only, and refuse (and
    record) a connect anywhere but loopback: nothing a test does leaves this machine."""
    network = Network(dict(names or {}))
    real_resolve, real_connect = socket.getaddrinfo, socket.socket.connect

    def resolve(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        text = host.decode() if isinstance(host, bytes) else str(host)
        if text.lower() in network.names:
            address = network.names[text.lower()]
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (address, int(port or 0)))]
        if text == "localhost" or _loopback(text):
            return real_resolve(host, port, *args, **kwargs)
        network.refused.append(("resolve", text))
        raise socket.gaierror(socket.EAI_NONAME, f"{text}: not a name this test resolves")

    def connect(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
            network.refused.append(("connect", address))
            raise ConnectionRefusedError(f"the test's guard refused a connect to {address}")
        real_connect(sock, address)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.setattr(socket.socket, "connect", connect)
    return network
