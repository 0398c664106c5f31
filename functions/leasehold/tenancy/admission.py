"""Admission: per-tenant back-pressure, decided in the same write that creates the job.

* A tenant's admission is spread over a few items of the ``tenants`` table
  (:meth:`Limits.shard_count`: :data:`SPREAD` at the default limits, more when the rate
  needs it, fewer when the limits are too small to split), each holding its share of the
  rate and an exact share of the live-job cap. Admission picks one at random and, in ONE
  update committed in the same transaction as the job row's put, advances the item's GCRA
  state (``tat``, the theoretical arrival time: ``SET tat = if_not_exists(tat, now) + T``)
  and takes a live slot (``ADD live 1``), conditioned on ``tat`` not being past
  ``now + tau`` (the rate) and on ``live < cap``. Nothing in the condition is a value the
  caller read earlier, so concurrent admissions never refuse one another: a refusal is the
  rate or the cap, and the item it returns says which. A ``tat`` that fell far behind the
  clock (the tenant used less than its rate) is first moved up by a plain conditional
  ``UpdateItem`` outside the transaction (:func:`_catch_up`), so concurrent catch-ups cost
  refused writes, never transactions. No crash, lost response or throttle can leave a slot
  without its job or a job without its slot.
* A refused item hands over to another (at most :data:`MAX_SHARD_TRIES`); 429 only when
  every item tried refused for the rate or the cap, with a message that says which. A write
  that keeps meeting concurrent transactions (``TransactionConflict``, past
  :func:`~leasehold.aws.dynamo.transact_write`'s tries) moves to another item too; if every
  item tried was contended the answer is 503, never 429.
* The slot is given back in the transaction that ends the job (:mod:`.counters`), on the item
  the row names (``admission_shard``, absent: 0; shard 0 is the tenant's own item). A manual
  retry or a redrive puts a finished job back live through the same admission
  (:func:`retry_admitted`): the rate, and the slot under the cap, in the transaction that
  re-queues it.
* A global backlog limit (visible messages in the pool's queues) answers 503 before any of it.
"""

from __future__ import annotations

import logging
import math
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from leasehold.aws.dynamo import Cancelled, condition_failed, contended, from_av, to_av
from leasehold.core.jobs import Job
from leasehold.core.spec import JobSpec
from leasehold.errors import Conflict, Overloaded, RateLimited
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import ADMISSION_SHARD, COUNTED, Submitted, submit
from leasehold.settings import PRIORITIES
from leasehold.tenancy.counters import add, slot_item

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Limits:
    #: Submissions per second a tenant earns, and how many it may spend at once.
    rate: float = 50.0
    burst: float = 200.0
    #: Non-terminal jobs a tenant may have.
    max_live: int = 10_000
    #: Visible messages across a pool's queues above which every submission gets 503.
    max_backlog: int = 100_000
    #: Items the rate and the cap are split over (None: :data:`SPREAD`, or as many as the
    #: rate needs at :data:`JOBS_PER_SHARD` admitted jobs/s each if that is more).
    shards: int | None = None

    def shard_count(self) -> int:
        """How many admission items a tenant's admission is spread over: enough that its
        concurrent admissions rarely meet on one item, and its rate fits; never so many that
        one item's burst or cap falls below one job. The spread of a small tenant stops
        where an item would keep less than :data:`MIN_SHARD_BURST` of burst or 1/s of rate
        (one item's refusal then sends the admission to the next one, at a write each)."""
        spread = min(SPREAD, int(self.burst // MIN_SHARD_BURST), int(self.rate))
        wanted = self.shards or max(math.ceil(self.rate / JOBS_PER_SHARD), spread)
        return max(1, min(wanted, int(self.burst), self.max_live))

    def per_shard(self, shards: int, shard: int = 0) -> Limits:
        """The share of item ``shard`` of ``shards``: rate and burst divided evenly, the cap
        split exactly (the first ``max_live % shards`` items take one more), so the items
        together admit the whole cap and never more."""
        if shards == 1:
            return self
        cap = self.max_live // shards + (1 if shard < self.max_live % shards else 0)
        return replace(self, rate=self.rate / shards, burst=self.burst / shards, max_live=cap)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Limits:
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, var, kind in (
            ("rate", "LEASEHOLD_TENANT_RATE", float), ("burst", "LEASEHOLD_TENANT_BURST", float),
            ("max_live", "LEASEHOLD_TENANT_MAX_LIVE", int),
            ("max_backlog", "LEASEHOLD_MAX_BACKLOG", int),
            ("shards", "LEASEHOLD_TENANT_ADMISSION_SHARDS", int),
        ):
            if env.get(var):
                values[name] = kind(env[var])
        return cls(**values)


#: Admitted jobs/s one admission item sustains: ~1,000 write units/s per partition key, and
#: a job costs 4 there (a transactional take and a transactional give-back, 2 units each):
#: 250, of which admission plans for 80%.
JOBS_PER_SHARD = 200
#: Items even a small tenant's admission is spread over, so that its concurrent admissions
#: (transactions, which DynamoDB refuses with ``TransactionConflict`` when they overlap on
#: one item) rarely meet on one item; fewer when the limits are too small to split (see
#: :meth:`Limits.shard_count`).
SPREAD = 8
#: The smallest burst one item of a spread tenant keeps (a rate of at least 1/s each, too).
MIN_SHARD_BURST = 16
#: Shards an admission tries before answering 429 (each try after the first costs a
#: refused write, unless this instance already knows the item is over its rate). A tenant
#: with at most this many items is tried on every one, so it is never refused while one of
#: them has room; a bigger one may be, near its limits, when the tries all land on full items.
MAX_SHARD_TRIES = 8

#: The GCRA's state on an admission item: the *theoretical arrival time* (ms) of the next
#: submission at the item's rate. Written only by an admission
#: (``SET tat = if_not_exists(tat, now) + T``) and by a catch-up after an idle spell
#: (``SET tat = now`` when it is behind ``now - lag``): it never decreases.
TAT = "tat"
#: The token bucket admission used to keep; removed from an item by its first new write.
_LEGACY = ("tokens", "refilled_at")

#: What an API instance knows of each admission item's ``tat`` (by item key): a lower bound
#: (``tat`` never decreases: an item it shows over its rate really is, and is not tried) and
#: an estimate (its own admissions added up: an item it shows fallen behind is caught up
#: before the admission's transaction, rather than after a refused one).
Buckets = dict[str, tuple[Decimal, Decimal]]
_BUCKETS_LOCK = threading.Lock()

_MS = Decimal("0.001")


@dataclass(frozen=True)
class _Gcra:
    """One item's rate as GCRA: an emission interval ``T`` (ms per submission) and a
    tolerance ``tau = (burst - 1) T``, so ``burst`` submissions pass at once and then one per
    ``T``. ``lag``: how far ``tat`` may fall behind the clock and still be advanced by an
    admission (exact GCRA would first move it up to ``now``); this lets a tenant that used
    less than its rate for a while through up to ``lag / T`` (half its burst) more at once,
    and never refuses what a token bucket would admit. Behind that, a catch-up write moves
    it to ``now`` first."""

    interval: Decimal
    tolerance: Decimal
    lag: Decimal

    @classmethod
    def of(cls, limits: Limits) -> _Gcra:
        interval = max(_MS, (Decimal(1000) / Decimal(str(limits.rate))).quantize(_MS))
        tolerance = (Decimal(str(max(0.0, limits.burst - 1))) * interval).quantize(_MS)
        return cls(interval, tolerance, (tolerance / 2).quantize(_MS))

    def retry_after(self, tat: Decimal, now: int) -> int:
        return max(1, math.ceil((tat - self.tolerance - now) / 1000))


#: What an admission adds to the item it spends a token on, by shard: a live slot (``live``:
#: 1), and for a retried job on its own shard its outcome taken back (``count_DEAD``: -1).
Adds = Callable[[int], Mapping[str, int]]


def _update(app: Leasehold, key: str, limits: Limits, gcra: _Gcra, now: int, *,
            adds: Mapping[str, int]) -> dict[str, Any]:
    """The item's update: a submission's worth of rate, and ``adds`` (a live slot),
    conditioned on the rate and on ``live < cap``, and on nothing a caller remembers: only
    writes that really used up the rate or the cap can refuse it (or, rarely, a ``tat`` that
    fell behind ``now - lag``, which :func:`_catch_up` moves first)."""
    names = {"#tat": TAT, "#live": "live", **{f"#o{i}": n for i, n in enumerate(_LEGACY)}}
    values: dict[str, Any] = {":T": gcra.interval, ":cap": limits.max_live, ":now": now,
                              ":lo": now - gcra.lag, ":hi": now + gcra.tolerance}
    expression = "SET #tat = if_not_exists(#tat, :now) + :T"
    rate = "(attribute_not_exists(#tat) OR #tat BETWEEN :lo AND :hi)"
    if adds:
        names.update({f"#a{i}": name for i, name in enumerate(adds)})
        values.update({f":a{i}": amount for i, amount in enumerate(adds.values())})
        expression += " ADD " + ", ".join(f"#a{i} :a{i}" for i in range(len(adds)))
    expression += " REMOVE " + ", ".join(f"#o{i}" for i in range(len(_LEGACY)))
    return {
        "TableName": app.settings.tenants_table, "Key": {"tenant": {"S": key}},
        "UpdateExpression": expression,
        "ConditionExpression": f"{rate} AND (attribute_not_exists(#live) OR #live < :cap)",
        "ExpressionAttributeNames": names, "ExpressionAttributeValues": to_av(values),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}


class _Refused(Exception):
    """The tenant update's condition failed; ``item`` is the admission item as it was."""

    def __init__(self, item: Mapping[str, Any]) -> None:
        super().__init__()
        self.item = item


class _OverRate(Exception):
    def __init__(self, retry_after: int) -> None:
        super().__init__()
        self.retry_after = retry_after


class _AtCap(Exception):
    pass


class _Contended(Exception):
    """Other writes kept meeting ours on this item (conflicts, or the item changing between
    our tries): neither its rate nor its cap said no."""


def _catch_up(app: Leasehold, key: str, gcra: _Gcra, now: int) -> Decimal | None:
    """Move a ``tat`` that fell behind ``now - lag`` up to ``now`` (the tenant's bucket is
    full again), outside any transaction: a plain conditional ``UpdateItem``, so concurrent
    catch-ups cost a refused write each, never a transaction. Returns ``tat`` as it is now
    (None: the item has none yet)."""
    try:
        app.clients.dynamodb.update_item(
            TableName=app.settings.tenants_table, Key={"tenant": {"S": key}},
            UpdateExpression="SET #tat = :now", ConditionExpression="#tat < :lo",
            ExpressionAttributeNames={"#tat": TAT},
            ExpressionAttributeValues=to_av({":now": now, ":lo": now - gcra.lag}),
            ReturnValuesOnConditionCheckFailure="ALL_OLD")
    except ClientError as exc:
        if contended(exc):
            return None  # a transaction is on it; the admission's own write decides
        if not condition_failed(exc):
            raise
        seen = from_av(exc.response.get("Item") or {}).get(TAT)  # type: ignore[arg-type]
        return None if seen is None else Decimal(str(seen))
    return Decimal(now)


def _seen(buckets: Buckets, key: str, tat: Decimal) -> None:
    """``tat`` as DynamoDB returned it: exact when read."""
    with _BUCKETS_LOCK:
        bound = buckets.get(key, (tat, tat))[0]
        buckets[key] = (max(bound, tat), tat)


def _spent(buckets: Buckets, key: str, read: Decimal | None, gcra: _Gcra, now: int) -> None:
    """One admission's interval added to what this instance knows of the item: the write
    added ``T`` to a ``tat`` of at least ``now - lag`` (its condition) and at least ``read``
    (a lower bound when it was read), or to ``now`` when there was none."""
    lowest = now - gcra.lag
    with _BUCKETS_LOCK:
        bound, estimate = buckets.get(key, (lowest, lowest))
        buckets[key] = (max(bound, max(read or lowest, lowest) + gcra.interval),
                        max(estimate, lowest) + gcra.interval)


def _admit(app: Leasehold, tenant: str, pool: str, limits: Limits, backlog: Backlog | None,
           buckets: Buckets | None, attempts: int, *, adds: Adds,
           write: Callable[[dict[str, Any], int], T], spent: Callable[[T], bool]) -> T:
    """Backlog (503), then the tenant update (a submission's worth of rate, and what
    ``adds`` says) made by ``write`` on one of the tenant's admission shards: a random one
    first, then others while they refuse or are contended (at most
    :data:`MAX_SHARD_TRIES`). 429 only when every shard tried said no because of the rate or
    the cap, and the message says which; contention alone is a 503."""
    if backlog is not None:
        backlog.check(app, pool, limits)
    buckets = {} if buckets is None else buckets
    shards = limits.shard_count()
    order = random.sample(range(shards), min(shards, MAX_SHARD_TRIES))
    over_rate: list[int] = []
    at_cap = contended = 0
    for shard in order:
        try:
            return _admit_on(app, shard, limits.per_shard(shards, shard),
                             slot_item(tenant, shard), buckets, attempts, adds=adds,
                             write=write, spent=spent)
        except _OverRate as refused:
            over_rate.append(refused.retry_after)
        except _AtCap:
            at_cap += 1
        except _Contended:
            contended += 1
    if contended:
        raise Overloaded(f"tenant {tenant!r}'s admission met concurrent writes on "
                         f"{contended} of its items; try again", retry_after=1)
    rate = f"its rate of {limits.rate:g} submissions/s (burst {limits.burst:g})"
    cap = f"{limits.max_live} live jobs, its limit"
    if not over_rate:
        raise RateLimited(f"tenant {tenant!r} has {cap}; wait for some to finish",
                          retry_after=5)
    if not at_cap:
        raise RateLimited(f"tenant {tenant!r} is over {rate}", retry_after=min(over_rate))
    raise RateLimited(f"tenant {tenant!r} is over {rate} and near its cap of {cap} (of its "
                      f"{shards} admission items, {len(over_rate)} are out of rate and "
                      f"{at_cap} full)", retry_after=min(over_rate))


def _admit_on(app: Leasehold, shard: int, limits: Limits, key: str, buckets: Buckets,
              attempts: int, *, adds: Adds, write: Callable[[dict[str, Any], int], T],
              spent: Callable[[T], bool]) -> T:
    """The update on one admission item. A refused write returns the item, which says why:
    the rate (:class:`_OverRate`), the cap (:class:`_AtCap`), or that its ``tat`` fell behind
    (caught up, and tried again; at most ``attempts`` writes)."""
    gcra = _Gcra.of(limits)
    for _ in range(attempts):
        now = app.now()
        known, estimate = buckets.get(key, (None, None))
        if known is not None and known > now + gcra.tolerance:
            raise _OverRate(gcra.retry_after(known, now))
        if estimate is not None and estimate < now - gcra.lag:
            caught = _catch_up(app, key, gcra, now)
            if caught is not None:
                _seen(buckets, key, caught)
                known = max(known or caught, caught)
                if known > now + gcra.tolerance:
                    continue
        update = _update(app, key, limits, gcra, now, adds=adds(shard))
        try:
            result = write(update, shard)
        except _Refused as refused:
            if int(refused.item.get("live", 0)) >= limits.max_live:
                raise _AtCap from None
            seen = refused.item.get(TAT)
            if seen is not None:
                _seen(buckets, key, Decimal(str(seen)))
            continue
        except ClientError as exc:
            if contended(exc):
                raise _Contended from None
            raise
        if spent(result):
            _spent(buckets, key, known, gcra, now)
        return result
    raise _Contended


def _slot(_: int) -> Mapping[str, int]:
    return {"live": 1}


def submit_admitted(app: Leasehold, spec: JobSpec, pool: str, limits: Limits,
                    backlog: Backlog | None = None, buckets: Buckets | None = None,
                    *, attempts: int = 5) -> Submitted:
    """Admission for one job and its creation: backlog (503), rate (429), live cap (429).

    An idempotent replay of a job that exists is answered without spending anything, even
    at the cap.
    """
    def write(update: dict[str, Any], shard: int) -> Submitted:
        try:
            return submit(app, spec, counted=True, shard=shard, also=[{"Update": update}])
        except Cancelled as cancelled:
            raise _Refused(cancelled.items[1] or {}) from None

    return _admit(app, spec.tenant, pool, limits, backlog, buckets, attempts, adds=_slot,
                  write=write, spent=lambda result: result.created)


def check(app: Leasehold, tenant: str, pool: str, limits: Limits,
          backlog: Backlog | None = None, buckets: Buckets | None = None,
          *, attempts: int = 5) -> None:
    """Admission that takes no slot (a workflow, whose steps hold none): backlog, rate, cap.

    A lost response here spends a second token, never a slot.
    """
    def write(update: dict[str, Any], shard: int) -> None:
        try:
            app.clients.dynamodb.update_item(**update)
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            raise _Refused(from_av(exc.response.get("Item") or {})) from None  # type: ignore[arg-type]

    _admit(app, tenant, pool, limits, backlog, buckets, attempts, adds=lambda _: {},
           write=write, spent=lambda _: True)


def retry_admitted(app: Leasehold, job_id: str, tenant: str | None, limits: Limits,
                   backlog: Backlog | None = None, buckets: Buckets | None = None, *,
                   actor: str = "api", reason: str = "manual retry", attempts: int = 5) -> Job:
    """Re-run a DEAD or CANCELLED job through admission, as a submission: backlog (503), rate
    (429) and, for a job the API admitted, a live slot under the cap (429), all in the one
    transaction that puts the job back in QUEUED.

    The outcome the finished job counted is taken back with it: in the slot's update when
    the slot is on the item that counted it, else by a second update in the transaction (one
    transaction cannot write an item twice). A lost response is recognised by the job row's
    fenced condition (``store.transition``), so nothing is taken twice.
    """
    job = control.finished(app, job_id, tenant)
    counted = bool(job.extra.get(COUNTED))
    home = int(job.extra.get(ADMISSION_SHARD) or 0)
    outcome = {f"count_{job.state.value}": -1}

    def adds(shard: int) -> Mapping[str, int]:
        if not counted:
            return {}  # a token only: the job holds no slot
        return {"live": 1, **outcome} if shard == home else {"live": 1}

    def write(update: dict[str, Any], shard: int) -> Job:
        also = [{"Update": update}]
        if counted and shard != home:
            also.append(add(app.settings, slot_item(job.tenant, home), outcome))
        try:
            return control.requeue(app, job, actor=actor, reason=reason, also=also,
                                   shard=shard if counted else None)
        except Cancelled as cancelled:
            if not cancelled.failed(1):  # a companion refused it (a unique key held)
                raise Conflict(f"job {job_id} cannot run again now: {cancelled}",
                               job_id=job_id) from None
            raise _Refused(cancelled.items[1] or {}) from None

    return _admit(app, job.tenant, job.pool, limits, backlog, buckets, attempts, adds=adds,
                  write=write, spent=lambda _: True)


class Backlog:
    """The pool's visible backlog, cached briefly so admission costs no SQS call per request."""

    def __init__(self, ttl_seconds: float = 2.0) -> None:
        self._ttl = ttl_seconds
        self._cache: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()
        #: One look at SQS at a time: the submissions arriving meanwhile wait for its answer
        #: instead of each asking again (8 clients made 8 looks per expiry; issue 21).
        self._looking = threading.Lock()

    def size(self, app: Leasehold, pool: str) -> int:
        cached = self._fresh(pool)
        if cached is not None:
            return cached
        with self._looking:
            cached = self._fresh(pool)
            if cached is not None:
                return cached
            total = sum(app.queues.visible(pool, priority) for priority in PRIORITIES)
            with self._lock:
                self._cache[pool] = (time.monotonic(), total)
            return total

    def _fresh(self, pool: str) -> int | None:
        with self._lock:
            cached = self._cache.get(pool)
        if cached is not None and time.monotonic() - cached[0] < self._ttl:
            return cached[1]
        return None

    def check(self, app: Leasehold, pool: str, limits: Limits) -> None:
        if pool in app.settings.pools and self.size(app, pool) >= limits.max_backlog:
            raise Overloaded(f"pool {pool!r} has a backlog of {limits.max_backlog}+ jobs",
                             retry_after=10)
