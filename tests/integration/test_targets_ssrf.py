"""SSRF after resolution: the address checked is the address connected to.

A resolver that answers a public address first and 127.0.0.1 second (DNS rebinding) gets
one question per call: the call connects to the public address it checked, with the name in
``Host``; the next call is refused at its check. Nothing reaches the local server by name.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold.targets.config import TargetConfig
from leasehold.targets.failures import AddressRefused
from leasehold.targets.http_call import Caller, call
from leasehold.targets.http_spec import prepare
from tests.integration.target_server import Server, serve

PUBLIC = "93.184.216.34"


@pytest.fixture
def server() -> Iterator[Server]:
    yield from serve()


def test_dns_rebinding_between_check_and_connect_reaches_nothing(server: Server) -> None:
    port = int(server.url.rsplit(":", 1)[1])
    answers = [PUBLIC, "127.0.0.1"]
    asked: list[str] = []
    connected: list[tuple[str, int]] = []

    def resolve(host: str, port: int, *args: Any) -> list[Any]:
        asked.append(host)
        address = answers.pop(0)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    def connect(address: tuple[str, int], timeout: float) -> socket.socket:
        connected.append(address)
        # The "public" host is played by the local server: reached only through the address
        # that was checked, never through a second lookup of the name.
        assert address == (PUBLIC, port)
        return socket.create_connection(("127.0.0.1", port), timeout=timeout)

    caller = Caller(TargetConfig(), now_ms=lambda: 0, resolve=resolve, connect=connect)
    payload, _ = prepare(TargetConfig(), {"url": f"http://rebind.example:{port}/x"})
    assert call(caller, payload)["status"] == 200
    assert asked == ["rebind.example"] and connected == [(PUBLIC, port)]
    assert server.requests[0].headers["Host"] == f"rebind.example:{port}"
    with pytest.raises(AddressRefused, match="loopback"):
        call(caller, payload)  # the name now answers 127.0.0.1: refused before connecting
    assert connected == [(PUBLIC, port)] and len(server.requests) == 1


def test_a_name_with_any_private_answer_is_refused_outright(server: Server) -> None:
    def resolve(host: str, port: int, *args: Any) -> list[Any]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in (PUBLIC, "10.0.0.7")]

    def connect(address: tuple[str, int], timeout: float) -> socket.socket:
        raise AssertionError("nothing may be connected to")

    caller = Caller(TargetConfig(), now_ms=lambda: 0, resolve=resolve, connect=connect)
    payload, _ = prepare(TargetConfig(), {"url": "http://mixed.example/"})
    with pytest.raises(AddressRefused, match="private"):
        call(caller, payload)


def test_the_real_resolver_refuses_localhost_without_the_allow_list(server: Server) -> None:
    port = int(server.url.rsplit(":", 1)[1])
    payload, _ = prepare(TargetConfig(), {"url": f"http://localhost:{port}/"})
    with pytest.raises(AddressRefused, match="loopback"):
        call(Caller(TargetConfig(), now_ms=lambda: 0), payload)
    assert server.requests == []
