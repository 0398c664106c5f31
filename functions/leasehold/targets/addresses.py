"""SSRF shut out: which addresses an HTTP target may reach, in one place.

A target may reach public unicast addresses only: never private, loopback, link-local
(including the instance metadata address 169.254.169.254), multicast, unspecified, shared
(100.64/10) or reserved ones, in IPv4 or IPv6, including an IPv4 address embedded in IPv6
(``::ffff:127.0.0.1``, ``::127.0.0.1``, ``2002:7f00:1::``, ``64:ff9b::7f00:1``). A host that
is an address literal is read the way a C resolver reads it (``2130706433``, ``0177.0.0.1``,
``0x7f.1``), so no spelling slips past the check at submission. A name is checked after
its resolution, on the address the connection is made to (:mod:`.http_call`). The
deployment's ``http_allow`` lets listed hosts or networks through.
"""

from __future__ import annotations

import ipaddress

from leasehold.targets.config import TargetConfig

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = ipaddress.ip_network("64:ff9b::/96")

#: The one table of what is refused, in order: the standard library's flags (its registry
#: of special-purpose ranges), then the ranges it reads as global that are not.
FLAGS = (("is_unspecified", "unspecified"), ("is_loopback", "loopback"),
         ("is_link_local", "link-local"), ("is_multicast", "multicast"),
         ("is_reserved", "reserved"), ("is_private", "private"))
RANGES = (
    (ipaddress.ip_network("100.64.0.0/10"), "shared (carrier-grade NAT)"),
    (ipaddress.ip_network("fec0::/10"), "site-local (deprecated, RFC 3879)"),
    (ipaddress.ip_network("3fff::/20"), "documentation (RFC 9637)"),
)


def _part(text: str) -> int:
    """One part of an IPv4 literal as inet_aton reads it: 0x hex, leading-0 octal, decimal."""
    if text[:2].lower() == "0x":
        return int(text[2:] or "0", 16)
    if len(text) > 1 and text[0] == "0":
        return int(text[1:], 8)
    return int(text, 10)


def literal(host: str) -> Address | None:
    """The address ``host`` spells, or None when it is a name.

    Accepts every inet_aton spelling (one to four parts, each decimal, octal or hex; the last
    part fills the remaining bytes) and bracketed or bare IPv6 (a zone id is refused)."""
    text = host.strip("[]")
    if ":" in text:
        if "%" in text:
            raise ValueError("an IPv6 zone id is not allowed")
        return ipaddress.IPv6Address(text)
    parts = text.split(".")
    if parts and parts[-1] == "" and len(parts) > 1:  # "127.0.0.1." is the same address
        parts = parts[:-1]
    if not 1 <= len(parts) <= 4 or not all(parts):
        return None
    try:
        values = [_part(p) for p in parts]
    except ValueError:
        return None  # a name (it has a letter that is not a hex digit after 0x)
    *head, last = values
    if any(not 0 <= v <= 255 for v in head) or not 0 <= last < 256 ** (5 - len(values)):
        raise ValueError(f"{host!r} is not a valid IPv4 address")
    number = 0
    for v in head:
        number = number * 256 + v
    number = number * 256 ** (5 - len(values)) + last
    return ipaddress.IPv4Address(number)


def embedded(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries (mapped, compatible, 6to4, NAT64), if any."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    packed = int(address)
    if packed >> 32 == 0 and packed > 1:  # ::a.b.c.d, deprecated "IPv4-compatible"
        return ipaddress.IPv4Address(packed)
    return None


def refusal(address: Address) -> str | None:
    """Why ``address`` may not be reached (None: it may)."""
    inner = embedded(address)
    if inner is not None:
        why = refusal(inner)
        return None if why is None else f"{why} (embedded in {address})"
    for test, what in FLAGS:
        if getattr(address, test):
            return f"{address} is a {what} address"
    for network, what in RANGES:
        if address.version == network.version and address in network:
            return f"{address} is a {what} address"
    if not address.is_global:
        return f"{address} is not a public address"
    return None


def allowed(config: TargetConfig, host: str, address: Address) -> str | None:
    """Why ``host`` at ``address`` may not be reached under ``config`` (None: it may)."""
    if host.lower().rstrip(".") in config.allow_hosts:
        return None
    if any(address in net for net in config.allow_networks if net.version == address.version):
        return None
    inner = embedded(address)
    if inner is not None and any(inner in net for net in config.allow_networks
                                 if net.version == 4):
        return None
    return refusal(address)
