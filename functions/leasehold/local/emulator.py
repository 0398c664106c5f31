"""The embedded AWS emulator: moto's server in a child process, with atomic DynamoDB requests.

moto's backends keep plain dicts with no locking, and its server answers each request on its
own thread. A conditional write is a read followed by a write inside moto, so two concurrent
ones could both pass their condition. :class:`AtomicRequests` serializes every DynamoDB
request (and every SQS request but long polls, which would otherwise hold the lock while they
wait), which makes each request atomic as it is on AWS. DynamoDB's item answers are written
straight as JSON (:mod:`leasehold.local.dynamo_responses`), moto's slowest step per job. It
also emulates SQS fair queues, which moto's standard queues do not
(:mod:`leasehold.local.fair_queues`).

:class:`CountedRequests` counts every request by service and operation; ``GET
/_leasehold/requests`` answers the counts so far (the idle benchmark reads it, to see what
the whole runtime, all its processes, asks of AWS). ``POST /_leasehold/snapshot`` copies
tables as one cut, under the DynamoDB lock (:mod:`leasehold.local.snapshots`): what the
runtime saves.

Run as ``python -m leasehold.local.emulator --port 0``: it prints ``READY <port>`` once it
listens, and exits when its parent does.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from leasehold.local import snapshots
from leasehold.local.gateway import OwnAddress

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
READY = "READY"


class AtomicRequests:
    """WSGI middleware: one DynamoDB request at a time, one SQS request at a time."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self.dynamodb = threading.Lock()
        self.sqs = threading.Lock()
        #: DynamoDB requests that may have written so far (a snapshot says which it holds).
        self.dynamodb_writes = 0

    def _lock_for(self, environ: dict[str, Any]) -> threading.Lock | None:
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        if target.startswith("DynamoDB"):
            return self.dynamodb
        if target.startswith("AmazonSQS."):
            if target.endswith(".ReceiveMessage") and self._long_poll(environ):
                return None  # moto's own message lock covers a waiting receive
            return self.sqs
        return None

    @staticmethod
    def _long_poll(environ: dict[str, Any]) -> bool:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)  # put it back for moto
        try:
            return int(json.loads(body or b"{}").get("WaitTimeSeconds") or 0) > 0
        except (ValueError, TypeError, AttributeError):
            return False

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]
                 ) -> Iterable[bytes]:
        lock = self._lock_for(environ)
        if lock is None:
            return self.app(environ, start_response)
        with lock:
            if lock is self.dynamodb and snapshots.writes(str(environ["HTTP_X_AMZ_TARGET"])):
                self.dynamodb_writes += 1
            # Drain the response inside the lock: moto may build it lazily.
            return list(self.app(environ, start_response))


class NoWebPages:
    """WSGI middleware: the emulator answers the SDKs, never a web page.

    moto's server grants every origin CORS, and nothing in it checks a signature: a page
    that found the port could read and write every table. SDKs send no ``Origin``, and name
    the emulator's own address in ``Host``; a browser's request carries an ``Origin`` (a
    preflight always does), a DNS-rebinding page's its own name in ``Host``."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self.own: OwnAddress | None = None  # set once the server is bound to its port

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]
                 ) -> Iterable[bytes]:
        host = str(environ.get("HTTP_HOST", ""))
        refusal = "a web page may not call the emulator" if "HTTP_ORIGIN" in environ else \
            None if self.own is None else self.own.refusal([("Host", host)])
        if refusal is None:
            return self.app(environ, start_response)
        body = json.dumps({"message": refusal}).encode()
        start_response("403 Forbidden", [("Content-Type", "application/json"),
                                          ("Content-Length", str(len(body)))])
        return [body]


#: The emulator's own path: the request counts so far (JSON, ``{"service Operation": n}``).
COUNTS_PATH = "/_leasehold/requests"


class CountedRequests:
    """WSGI middleware: counts requests by service and operation, answers them on a path."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    @staticmethod
    def operation(environ: dict[str, Any]) -> str:
        """``dynamodb Query``, ``sqs ReceiveMessage``, ... (JSON protocols name it in a header;
        others by their signed service and their method)."""
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        if target:
            prefix, _, name = target.partition(".")
            service = {"DynamoDB": "dynamodb", "AmazonSQS": "sqs", "AWSEvents": "events",
                       "DynamoDBStreams": "dynamodbstreams"}.get(prefix.split("_")[0],
                                                                 prefix.lower())
            return f"{service} {name}"
        scope = str(environ.get("HTTP_AUTHORIZATION", "")).split("Credential=")[-1].split("/")
        service = scope[3] if len(scope) > 3 else "unknown"
        return f"{service} {environ.get('REQUEST_METHOD', '?')}"

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]
                 ) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == COUNTS_PATH:
            with self._lock:
                body = json.dumps(dict(self.counts)).encode()
            start_response("200 OK", [("Content-Type", "application/json"),
                                      ("Content-Length", str(len(body)))])
            return [body]
        key = self.operation(environ)
        with self._lock:
            self.counts[key] += 1
        return self.app(environ, start_response)


def counts(endpoint: str, timeout: float = 10.0) -> dict[str, int]:
    """The request counts of the emulator at ``endpoint`` so far."""
    with urllib.request.urlopen(endpoint + COUNTS_PATH, timeout=timeout) as response:
        found: dict[str, int] = json.loads(response.read())
    return found


def _watch_parent(parent: int) -> None:
    """Exit when the process that started us is gone (it may have been SIGKILLed)."""
    while True:
        if os.getppid() != parent:
            os._exit(0)
        time.sleep(0.5)


def prompt_long_polls() -> None:
    """Make moto's waiting receive see delayed and re-visible messages when they are due.

    moto wakes a long poll when a message is *sent*, but a message whose ``DelaySeconds`` or
    visibility timeout runs out sends nothing: moto's loop re-checks its queue only once a
    second, so an idle worker's long poll would start a delayed job up to a second late (SQS
    itself returns it when due). This waits until the queue's next message falls due instead.
    """
    from moto.sqs import models

    def wait_for_messages(self: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._messages_lock:
            while not self.messages:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                now = models.unix_time_millis()
                due = [max(m.visible_at, m.delayed_until) for m in self._messages]
                soonest = (min(due) - now) / 1000 if due else left
                self._messages_lock.wait(min(left, max(0.005, soonest)))

    models.Queue.wait_for_messages = wait_for_messages  # type: ignore[method-assign]


def serve(host: str, port: int, parent: int | None = None,
          allowed_hosts: Iterable[str] = ()) -> None:
    from moto.moto_server.werkzeug_app import create_backend_app

    from leasehold.local import (
        dynamo_parsing,
        dynamo_responses,
        dynamo_transactions,
        fair_queues,
        sqs_time,
    )
    from leasehold.local.emulator_server import Dispatcher, make_server

    dynamo_responses.install()
    dynamo_responses.install_streams()
    dynamo_parsing.install()
    dynamo_transactions.install()
    sqs_time.install()
    sqs_time.install_delay_tick(float(os.environ.get(sqs_time.DELAY_TICK_ENV) or 0))
    fair_queues.install()
    prompt_long_polls()
    atomic = AtomicRequests(Dispatcher(create_backend_app))
    # Outside the counts: a snapshot is the runtime's own request, not one made of AWS. The
    # guard stands in front of both: a web page may read neither the tables nor a snapshot.
    guard = NoWebPages(snapshots.Snapshots(CountedRequests(atomic), atomic))
    server = make_server(host, port, guard)
    guard.own = OwnAddress.of(host, server.server_port, allowed_hosts)
    if parent is not None:
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    print(f"{READY} {server.server_port}", flush=True)
    server.serve_forever()


#: What a runtime without the emulator's dependency is told.
MISSING_MOTO = ("the embedded AWS emulator needs moto, which this Python lacks: install "
                "Leasehold with its `local` extra (pip install 'leasehold[local]'; a project "
                "from `leasehold init` has it in requirements-dev.txt), or run against another "
                "endpoint with --endpoint")


@dataclass
class Emulator:
    process: subprocess.Popen[str]
    endpoint: str

    def stop(self, timeout: float = 5.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start(host: str = "127.0.0.1", port: int = 0, *, timeout: float = 30.0,
          allowed_hosts: Iterable[str] = ()) -> Emulator:
    """Start the emulator in a child process and wait until it listens."""
    if importlib.util.find_spec("moto") is None:
        raise RuntimeError(MISSING_MOTO)
    process = subprocess.Popen(
        [sys.executable, "-m", "leasehold.local.emulator", "--host", host, "--port", str(port),
         "--parent", str(os.getpid()), *(f"--allow-host={name}" for name in allowed_hosts)],
        # Read until it listens, so that a failed start says why; drained (and dropped) after.
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # Its own session: Ctrl-C reaches the runtime and its workers, which still need
        # the emulator while they drain; the runtime stops it last.
        start_new_session=True,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith(READY) or process.poll() is not None:
            break
    assert process.stderr is not None
    if not line.startswith(READY):
        process.kill()
        said = (line + process.stderr.read()).strip()[-2000:] or \
            f"it exited with status {process.wait()} and said nothing"
        raise RuntimeError(f"the embedded AWS emulator did not start:\n{said}")
    threading.Thread(target=process.stderr.read, daemon=True,
                     name="emulator-stderr").start()
    return Emulator(process, f"http://{host}:{int(line.split()[1])}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="leasehold-emulator")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--parent", type=int, default=None)
    parser.add_argument("--allow-host", action="append", default=[])
    args = parser.parse_args(argv)
    serve(args.host, args.port, args.parent, args.allow_host)


if __name__ == "__main__":
    main()
