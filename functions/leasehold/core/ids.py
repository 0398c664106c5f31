"""Job ids: time-ordered and random (ULID layout), or derived from an idempotency key; a job's
id ends in its *home*, the jobs table partition its row lives in (issue 46).

A home is 9 characters of a hash of the tenant and 2 of a shard (``{tag}{shard}``): the
jobs table is keyed (``pk`` = the home, ``job_id``), so a row's key follows from its id
alone (``GET /jobs/{id}``, a message, an index entry, a stream record: no pointer to a row
needs to carry its tenant), and a tenant's listing is a ``Query`` of its homes (one per
shard) on the table itself, with no index entry per job. Two tenants whose tags collide
(45 bits) share homes; every reader of a listing keeps only its own tenant's rows.
"""

from __future__ import annotations

import hashlib
import secrets

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32
_DIGITS = frozenset(_ALPHABET)


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


#: The home's length: a tenant tag and two shard digits.
TAG_LENGTH = 9
_SHARD_LENGTH = 2
HOME_LENGTH = TAG_LENGTH + _SHARD_LENGTH
#: Shards a home can name (two base32 digits). Every write of a row lands in its home, so a
#: tenant's sustained rate is about 1,000 write units/s per shard over its units per job.
MAX_SHARDS = 32 ** _SHARD_LENGTH
#: A time-ordered id: 10 characters of milliseconds, 16 random, then the home.
_TIME_LENGTH = 10
_JOB_ID_LENGTH = 26 + HOME_LENGTH


def tenant_tag(tenant: str) -> str:
    """The 9 characters naming ``tenant`` in its jobs' homes (45 bits of a hash)."""
    digest = hashlib.blake2b(tenant.encode(), digest_size=8, person=b"lh-tenant").digest()
    return _b32(int.from_bytes(digest, "big") >> (64 - 5 * TAG_LENGTH), TAG_LENGTH)


def home(tenant: str, shard: int) -> str:
    """The jobs table partition of ``tenant``'s ``shard`` (0 <= shard < :data:`MAX_SHARDS`)."""
    if not 0 <= shard < MAX_SHARDS:
        raise ValueError(f"a home's shard is 0 to {MAX_SHARDS - 1}, not {shard}")
    return tenant_tag(tenant) + _b32(shard, _SHARD_LENGTH)


def home_of(job_id: str) -> str:
    """The partition of the row with this id (its last :data:`HOME_LENGTH` characters)."""
    return job_id[-HOME_LENGTH:]


def new_job_id(now_ms: int, tenant: str, shards: int) -> str:
    """A time-ordered id (:func:`new_id`) at home in one of ``tenant``'s first ``shards``
    shards, chosen at random (a tenant's writes spread over that many partitions)."""
    return new_id(now_ms) + home(tenant, secrets.randbelow(shards))


def derived_job_id(tenant: str, *parts: str) -> str:
    """A job id derived from ``parts`` (:func:`derived_id`), at home with ``tenant``: the
    same for every replay whatever the settings (its shard comes from the parts)."""
    base = derived_id(*parts)
    return base + home(tenant, shard_of(base, MAX_SHARDS))


def time_prefix(now_ms: int) -> str:
    """The first characters of every time-ordered id made at ``now_ms``."""
    return _b32(now_ms & ((1 << 48) - 1), _TIME_LENGTH)


def id_time(job_id: str) -> int | None:
    """The creation time (ms) a time-ordered job id names; None for any other id."""
    if len(job_id) != _JOB_ID_LENGTH or job_id.startswith("K") or \
            not set(job_id) <= _DIGITS:
        return None
    value = 0
    for char in job_id[:_TIME_LENGTH]:
        value = value * 32 + _ALPHABET.index(char)
    return value


def listed_at_home(job_id: str, tenant: str, created_at: int, shards: int) -> bool:
    """Whether a Query of ``tenant``'s first ``shards`` homes lists this row, in creation
    order: its id is time-ordered at its own creation time and at home in one of those
    shards. Every other row (a derived id, a tenant whose tag another shares) is listed from
    the sparse ``by_tenant_shard`` index instead, and a listing reads each row from one of
    the two, never both."""
    if id_time(job_id) != created_at:
        return False
    shard = 0
    for char in job_id[-_SHARD_LENGTH:]:
        shard = shard * 32 + _ALPHABET.index(char)  # a time-ordered id: base32 throughout
    return (shard < shards
            and home_of(job_id)[:TAG_LENGTH] == tenant_tag(tenant))


def shard_of(job_id: str, shards: int) -> int:
    """Which index shard an id belongs to; uniform for both kinds of id."""
    return int.from_bytes(hashlib.blake2b(job_id.encode(), digest_size=4).digest(), "big") % shards
