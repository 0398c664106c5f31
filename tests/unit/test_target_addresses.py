"""SSRF: every spelling of an address an HTTP target might use, checked by one table.

A host that is an address literal is read as a C resolver reads it (decimal, octal, hex,
short forms), and IPv6 forms that embed an IPv4 address are judged by that address.
"""

from __future__ import annotations

import ipaddress

import pytest

from leasehold.errors import ValidationError
from leasehold.targets.addresses import allowed, literal, refusal
from leasehold.targets.config import LOOPBACK, TargetConfig
from leasehold.targets.http_spec import prepare

NONE = TargetConfig()

#: (host as written in the URL, the address it is, why it is refused: None when it is not)
SPELLINGS = [
    ("127.0.0.1", "127.0.0.1", "loopback"),
    ("127.1", "127.0.0.1", "loopback"),
    ("2130706433", "127.0.0.1", "loopback"),
    ("0x7f000001", "127.0.0.1", "loopback"),
    ("0177.0.0.1", "127.0.0.1", "loopback"),
    ("0x7f.0.0.1", "127.0.0.1", "loopback"),
    ("017700000001", "127.0.0.1", "loopback"),
    ("127.0.0.1.", "127.0.0.1", "loopback"),
    ("0", "0.0.0.0", "unspecified"),
    ("0.0.0.0", "0.0.0.0", "unspecified"),
    ("10.0.0.1", "10.0.0.1", "private"),
    ("012.0.0.1", "10.0.0.1", "private"),
    ("172.16.5.4", "172.16.5.4", "private"),
    ("192.168.1.1", "192.168.1.1", "private"),
    ("3232235777", "192.168.1.1", "private"),
    ("100.64.0.1", "100.64.0.1", "shared"),
    ("169.254.169.254", "169.254.169.254", "link-local"),
    ("2852039166", "169.254.169.254", "link-local"),
    ("0xa9.0xfe.0xa9.0xfe", "169.254.169.254", "link-local"),
    ("0251.0376.0251.0376", "169.254.169.254", "link-local"),
    ("169.254.43518", "169.254.169.254", "link-local"),
    ("224.0.0.1", "224.0.0.1", "multicast"),
    ("239.255.255.250", "239.255.255.250", "multicast"),
    ("255.255.255.255", "255.255.255.255", "reserved"),
    ("[::1]", "::1", "loopback"),
    ("[::]", "::", "unspecified"),
    ("[0:0:0:0:0:0:0:1]", "::1", "loopback"),
    ("[::ffff:127.0.0.1]", "::ffff:7f00:1", "loopback"),
    ("[::ffff:7f00:1]", "::ffff:7f00:1", "loopback"),
    ("[::ffff:169.254.169.254]", "::ffff:a9fe:a9fe", "link-local"),
    ("[::127.0.0.1]", "::7f00:1", "loopback"),
    ("[2002:7f00:1::]", "2002:7f00:1::", "loopback"),
    ("[64:ff9b::a9fe:a9fe]", "64:ff9b::a9fe:a9fe", "link-local"),
    ("[fe80::1]", "fe80::1", "link-local"),
    ("[fd00:ec2::254]", "fd00:ec2::254", "private"),
    ("[fc00::1]", "fc00::1", "private"),
    ("[ff02::1]", "ff02::1", "multicast"),
    ("[fec0::1]", "fec0::1", "site-local"),
    ("[feff:ffff::1]", "feff:ffff::1", "site-local"),
    ("[3fff::1]", "3fff::1", "documentation"),
    ("[3fff:fff:ffff::1]", "3fff:fff:ffff::1", "documentation"),
    ("[2001:db8::1]", "2001:db8::1", "private"),
    ("93.184.216.34", "93.184.216.34", None),
    ("1572395042", "93.184.216.34", None),
    ("[2606:2800:220:1:248:1893:25c8:1946]", "2606:2800:220:1:248:1893:25c8:1946", None),
    ("[::ffff:93.184.216.34]", "::ffff:5db8:d822", None),
    ("[3fff:1000::1]", "3fff:1000::1", None),  # just past the documentation /20
]


@pytest.mark.parametrize(("host", "address", "why"), SPELLINGS)
def test_each_spelling_is_read_as_its_address_and_judged_by_it(
        host: str, address: str, why: str | None) -> None:
    found = literal(host)
    assert found == ipaddress.ip_address(address)
    reason = refusal(found)
    if why is None:
        assert reason is None
    else:
        assert reason is not None and why in reason


@pytest.mark.parametrize(("host", "address", "why"), [s for s in SPELLINGS if s[2]])
def test_a_refused_literal_is_a_422_at_submission_naming_the_url(
        host: str, address: str, why: str) -> None:
    with pytest.raises(ValidationError) as caught:
        prepare(NONE, {"url": f"http://{host}:8080/hook"})
    assert caught.value.field == "target.http.url"
    assert why in str(caught.value)


@pytest.mark.parametrize("host", ["api.partner.example", "deadbeef", "1.2.3.4.example",
                                  "0x7g.1"])
def test_a_name_is_not_a_literal_and_is_checked_after_resolution(host: str) -> None:
    assert literal(host) is None


@pytest.mark.parametrize("host", ["256.0.0.1", "1.2.3.256", "1.16777216", "4294967296"])
def test_an_address_out_of_range_is_refused_not_read_as_a_name(host: str) -> None:
    with pytest.raises(ValidationError, match="invalid address"):
        prepare(NONE, {"url": f"http://{host}/"})


def test_the_allow_list_lets_listed_hosts_and_networks_through_and_nothing_else() -> None:
    config = TargetConfig.parse({"http_allow": ["10.1.0.0/16", "hooks.internal", "127.0.0.0/8"]})
    assert allowed(config, "x", ipaddress.ip_address("10.1.2.3")) is None
    assert allowed(config, "x", ipaddress.ip_address("10.2.0.1")) is not None
    assert allowed(config, "hooks.internal", ipaddress.ip_address("10.9.9.9")) is None
    assert allowed(config, "x", ipaddress.ip_address("::ffff:127.0.0.1")) is None
    assert allowed(config, "x", ipaddress.ip_address("169.254.169.254")) is not None
    loopback = TargetConfig(allow_networks=LOOPBACK)
    assert allowed(loopback, "x", ipaddress.ip_address("127.0.0.1")) is None
    assert allowed(loopback, "x", ipaddress.ip_address("::1")) is None
    assert allowed(loopback, "x", ipaddress.ip_address("169.254.169.254")) is not None
    assert allowed(loopback, "x", ipaddress.ip_address("10.0.0.1")) is not None
