"""Which requests a local server answers: its own Host, and no other page's Origin."""

from __future__ import annotations

import pytest

from leasehold.local.gateway import OwnAddress

OWN = OwnAddress.of("127.0.0.1", 8080, ["devbox.lan", "localhost:9000"])


@pytest.mark.parametrize(("headers", "served"), [
    ([("Host", "127.0.0.1:8080")], True),
    ([("host", "LocalHost:8080")], True),
    ([("Host", "devbox.lan:8080")], True),
    ([("Host", "localhost:9000")], True),  # a container's port mapped to another
    ([("Host", "127.0.0.1:8080"), ("Origin", "http://localhost:8080")], True),
    ([("Host", "evil.example:8080")], False),  # DNS rebinding
    ([("Host", "localhost")], False),  # port 80
    ([("Host", "localhost:8081")], False),
    ([("Host", "127.0.0.1:8080@evil.example")], False),
    ([("Host", "127.0.0.1:8080/x")], False),
    ([], False),
    ([("Host", "127.0.0.1:8080"), ("Host", "evil.example")], False),
    ([("Host", "127.0.0.1:8080"), ("Origin", "https://evil.example")], False),
    ([("Host", "127.0.0.1:8080"), ("Origin", "null")], False),
    ([("Host", "127.0.0.1:8080"), ("Origin", "https://127.0.0.1:8080")], False),
    ([("Host", "127.0.0.1:8080"), ("Origin", "http://localhost:3000")], False),
    ([("Host", "127.0.0.1:8080"), ("Origin", "http://127.0.0.1:8080"),
      ("Origin", "http://evil.example")], False),
])
def test_a_request_is_served_only_at_its_own_address_and_from_its_own_pages(
        headers: list[tuple[str, str]], served: bool) -> None:
    assert (OWN.refusal(headers) is None) == served


def test_the_bound_host_is_one_of_its_names() -> None:
    own = OwnAddress.of("0.0.0.0", 8080)
    assert own.refusal([("Host", "0.0.0.0:8080")]) is None
    assert own.refusal([("Host", "192.168.1.5:8080")]) is not None


@pytest.mark.parametrize("name", ["a b", "host:port", "x/y", ""])
def test_an_allowed_name_that_is_no_host_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="not a host name"):
        OwnAddress.of("127.0.0.1", 8080, [name])
