"""Job ids: time-ordered and random (ULID layout), or derived from an idempotency key."""

from __future__ import annotations

import hashlib
import secrets

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32


def _b32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id(now_ms: int) -> str:
    """48 bits of milliseconds then 80 random bits: sorts by creation time, never collides."""
    return _b32(now_ms & ((1 << 48) - 1), 10) + _b32(secrets.randbits(80), 16)


def derived_id(*parts: str) -> str:
    """A stable id from its parts, so a replay or a second tick finds the same row.

    Prefixed with ``K`` so it never collides with a time-ordered id (those start with ``0``
    until the year 10889).
    """
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return "K" + _b32(int.from_bytes(digest[:16], "big"), 25)


def shard_of(job_id: str, shards: int) -> int:
    """Which index shard an id belongs to; uniform for both kinds of id."""
    return int.from_bytes(hashlib.blake2b(job_id.encode(), digest_size=4).digest(), "big") % shards
