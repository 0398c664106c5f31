"""The two substrates the front-door benchmark (bench.front_door) runs on, and their counts.

* ``emulator``: the embedded emulator (:mod:`leasehold.local.emulator`: moto with atomic
  DynamoDB requests), in a child process; it counts every request it serves.
* ``dynamodb_local``: AWS's own DynamoDB Local (``tests/ddblocal.py`` starts it in a network
  namespace of its own) for DynamoDB, and the embedded emulator (moto) for SQS and
  EventBridge, behind one endpoint: a router that sends each request where it belongs and
  counts it. The router, DynamoDB Local's relay and the emulator run in one child process
  (``python -m bench.substrate dynamodb_local``), so the benchmark's own threads do not share
  their interpreter with it; each router thread keeps its connections upstream open (no
  relay per request).

Both answer :data:`leasehold.local.emulator.COUNTS_PATH` with the requests counted so far by
``service Operation``, so :func:`counts` reads either.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import http.server
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from leasehold.local import emulator
from leasehold.local.emulator import COUNTS_PATH, CountedRequests
from leasehold.local.gateway import end_with

ROOT = Path(__file__).resolve().parent.parent
SUBSTRATES = ("emulator", "dynamodb_local")
READY = "READY"


@dataclass(frozen=True)
class Substrate:
    name: str
    endpoint: str

    def counts(self) -> dict[str, int]:
        """Requests served so far, by ``service Operation``."""
        return emulator.counts(self.endpoint)


def grew(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """What was counted between two reads of :meth:`Substrate.counts`."""
    return {op: after[op] - before.get(op, 0) for op in after if after[op] - before.get(op, 0)}


@contextmanager
def started(name: str) -> Iterator[Substrate]:
    """Start the substrate ``name`` (one of :data:`SUBSTRATES`); stopped on exit."""
    if name == "emulator":
        server = emulator.start()
        try:
            yield Substrate(name, server.endpoint)
        finally:
            server.stop()
        return
    if name != "dynamodb_local":
        raise ValueError(f"unknown substrate {name!r}: one of {', '.join(SUBSTRATES)}")
    log = Path(tempfile.mkdtemp(prefix="bench-substrate-")) / "substrate.log"
    with log.open("w") as sink:  # a file, not a pipe nobody reads: it never blocks the router
        process = subprocess.Popen(
            [sys.executable, "-m", "bench.substrate", name, "--parent", str(os.getpid())],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=sink, text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)})
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith(READY):
        process.kill()
        raise RuntimeError(f"the {name} substrate did not start: {line.strip()!r} "
                           f"{log.read_text(errors='replace')[-2000:]}")
    try:
        yield Substrate(name, f"http://127.0.0.1:{int(line.split()[1])}")
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- the router (in the child process) ------------------------------------------------------

class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket: DynamoDB Local's relay inside its namespace."""

    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=60)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Router

    def _upstream(self, dynamodb: bool) -> http.client.HTTPConnection:
        local = self.server.local
        name = "dynamodb" if dynamodb else "rest"
        connection = getattr(local, name, None)
        if connection is None:
            connection = (_UnixConnection(self.server.dynamodb_socket) if dynamodb else
                          http.client.HTTPConnection(self.server.rest, timeout=60))
            setattr(local, name, connection)
        return connection

    def _forward(self) -> None:
        if self.path == COUNTS_PATH:
            self._answer(200, "OK", [("Content-Type", "application/json")],
                         self.server.counts_json())
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        target = self.headers.get("X-Amz-Target", "")
        self.server.count(CountedRequests.operation({
            "HTTP_X_AMZ_TARGET": target, "REQUEST_METHOD": self.command,
            "HTTP_AUTHORIZATION": self.headers.get("Authorization", "")}))
        dynamodb = target.startswith("DynamoDB")
        headers = dict(self.headers.items())
        for attempt in (1, 2):
            connection = self._upstream(dynamodb)
            reused = connection.sock is not None
            try:
                if dynamodb:  # moto keeps the router's address: its queue URLs name it
                    headers["Host"] = "localhost"
                connection.request(self.command, self.path, body=body, headers=headers)
                reply = connection.getresponse()
                data = reply.read()
                break
            except (OSError, http.client.HTTPException) as exc:
                connection.close()
                if reused and attempt == 1:  # a kept connection the upstream had closed
                    continue
                with contextlib.suppress(OSError):
                    self._answer(502, "Bad Gateway", [], f"upstream: {exc}".encode())
                return
        self._answer(reply.status, reply.reason, [
            (name, value) for name, value in reply.getheaders()
            if name.lower() not in ("content-length", "transfer-encoding", "connection",
                                    "date", "server", "keep-alive")], data)

    def _answer(self, status: int, reason: str, headers: list[tuple[str, str]],
                data: bytes) -> None:
        self.send_response(status, reason)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        end_with(self, data)  # one write: a second would wait for the client's delayed ACK

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

    def log_message(self, *_: object) -> None:
        pass


class Router(http.server.ThreadingHTTPServer):
    """DynamoDB's requests to DynamoDB Local's socket, every other one to ``rest``; counted."""

    daemon_threads = True

    def __init__(self, *, dynamodb_socket: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.dynamodb_socket = dynamodb_socket
        #: Where every other request goes (``host:port``), set once it has started.
        self.rest = ""
        self.local = threading.local()
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def count(self, operation: str) -> None:
        with self._lock:
            self._counts[operation] += 1

    def counts_json(self) -> bytes:
        import json

        with self._lock:
            return json.dumps(dict(self._counts)).encode()


def _serve_dynamodb_local(parent: int | None) -> None:
    from leasehold.local import dynamodb_local as ddblocal

    database = ddblocal.start()
    router = Router(dynamodb_socket=str(database.workdir / "ddb.sock"))
    own = f"127.0.0.1:{router.server_address[1]}"
    # Requests keep their Host (the router's), so moto's queue URLs name the router and
    # every SQS request, also one sent to a queue URL, is counted here.
    sqs = emulator.start(allowed_hosts=[own])
    router.rest = urllib.parse.urlsplit(sqs.endpoint).netloc

    def stop(*_: object) -> None:
        sqs.stop()
        database.stop()
        os._exit(0)

    import signal

    signal.signal(signal.SIGTERM, stop)
    if parent is not None:
        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(0.5)
            stop()

        threading.Thread(target=watch, daemon=True).start()
    print(f"{READY} {router.server_address[1]}", flush=True)
    router.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.substrate")
    parser.add_argument("name", choices=["dynamodb_local"])
    parser.add_argument("--parent", type=int, default=None)
    args = parser.parse_args(argv)
    _serve_dynamodb_local(args.parent)


if __name__ == "__main__":
    main()
