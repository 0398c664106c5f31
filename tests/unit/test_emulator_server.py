"""The local servers keep HTTP/1.1 connections open and answer each request in one write.

The embedded emulator's server (:mod:`leasehold.local.emulator_server`) keeps a connection
for the next request (werkzeug closed every one), reads each body whole so the next request
starts where it should, and closes a connection it cannot frame. It and the local API
gateway send each answer's head and body in one write: two small writes on a kept connection
wait for the client's delayed ACK (40 ms an answer, measured through ``leasehold dev``).
"""

from __future__ import annotations

import http.client
import json
import socketserver
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from leasehold.local import emulator_server
from leasehold.local.gateway import Gateway


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """Echoes the body it read, or reads none (``/unread``), or fails (``/fail``)."""
    path = environ["PATH_INFO"]
    if path == "/fail":
        raise RuntimeError("the application failed")
    length = int(environ.get("CONTENT_LENGTH") or 0)
    stream = environ["wsgi.input"]
    body = b"" if path == "/unread" else \
        stream.read() if environ.get("wsgi.input_terminated") else stream.read(length)
    start_response("200 OK", [("Content-Type", "application/json"), ("Connection", "close")])
    return [b'{"read": ', json.dumps(body.decode()).encode(), b"}"]


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every write the servers make to a client's socket."""
    written: list[bytes] = []
    real = socketserver._SocketWriter.write

    def write(self: Any, data: Any) -> int:
        written.append(bytes(data))
        return real(self, data)

    monkeypatch.setattr(socketserver._SocketWriter, "write", write)
    return written


@pytest.fixture
def emulator_port() -> Iterator[int]:
    server = emulator_server.make_server("127.0.0.1", 0, app)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()


def _ask(connection: http.client.HTTPConnection, path: str, body: bytes = b"",
         headers: dict[str, str] | None = None) -> tuple[int, bytes, str | None]:
    connection.request("POST", path, body, headers=headers or {})
    response = connection.getresponse()
    return response.status, response.read(), response.getheader("Connection")


def test_a_kept_connection_answers_request_after_request(emulator_port: int,
                                                         writes: list[bytes]) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", emulator_port, timeout=10)
    first_socket = None
    for n, path in enumerate(["/a", "/unread", "/b", "/unread", "/c"]):
        status, answer, close = _ask(connection, path, json.dumps({"n": n}).encode())
        assert status == 200 and close is None  # the application's own "close" is not sent
        expected = "" if path == "/unread" else json.dumps({"n": n})
        assert json.loads(answer) == {"read": expected}  # an unread body is not the next request
        first_socket = first_socket or connection.sock
        assert connection.sock is first_socket  # the same connection throughout
    assert len(writes) == 5  # one write per answer, head and body together
    assert all(w.startswith(b"HTTP/1.1 200") and w.endswith(b"}") for w in writes)


def test_a_chunked_request_is_answered_and_its_connection_closed(emulator_port: int) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", emulator_port, timeout=10)
    connection.request("POST", "/a", body=iter([b'{"x":', b" 1}"]),
                       headers={"Transfer-Encoding": "chunked"}, encode_chunked=True)
    response = connection.getresponse()
    assert (response.status, json.loads(response.read())) == (200, {"read": '{"x": 1}'})
    assert response.getheader("Connection") == "close"


def test_a_failing_application_answers_500_and_closes(emulator_port: int) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", emulator_port, timeout=10)
    status, answer, close = _ask(connection, "/fail", b"{}")
    assert (status, answer, close) == (500, b"Internal Server Error", "close")
    status, answer, _ = _ask(connection, "/a", b"again")  # a new connection, opened for it
    assert (status, json.loads(answer)) == (200, {"read": "again"})


def test_the_dispatcher_looks_a_host_up_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import backends

    listed: list[int] = []
    real = backends.list_of_moto_modules

    def list_of_moto_modules() -> Any:
        listed.append(1)
        return real()

    monkeypatch.setattr(backends, "list_of_moto_modules", list_of_moto_modules)
    dispatcher = emulator_server.Dispatcher(lambda service: service)
    hosts = ["dynamodb.us-east-1.amazonaws.com", "sqs.us-east-1.amazonaws.com"]
    found = [dispatcher.get_backend_for_host(host) for host in hosts * 3]
    assert found == ["dynamodb", "sqs"] * 3
    assert len(listed) == 2


def test_the_gateway_answers_in_one_write_on_a_kept_connection(writes: list[bytes]) -> None:
    def handler(event: dict[str, Any]) -> dict[str, Any]:
        return {"statusCode": 201, "headers": {"Content-Type": "application/json"},
                "body": json.dumps({"got": event["body"]})}

    gateway = Gateway("127.0.0.1", 0, handler)
    threading.Thread(target=gateway.serve_forever, daemon=True).start()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", gateway.server_port, timeout=10)
        for n in range(3):
            status, answer, close = _ask(connection, "/jobs", str(n).encode(),
                                         {"Content-Type": "application/json"})
            assert (status, json.loads(answer), close) == (201, {"got": str(n)}, None)
    finally:
        gateway.shutdown()
        gateway.server_close()
    assert len(writes) == 3 and all(w.endswith(b"}") for w in writes)
