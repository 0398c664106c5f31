"""Admission: per-tenant back-pressure, decided in the same write that creates the job.

* A token bucket (``tokens``, ``refilled_at``) throttles submissions, and ``live`` counts the
  tenant's non-terminal API jobs, one item per tenant in the ``tenants`` table. Admission
  spends a token and takes a live slot in ONE transaction with the job row's put, conditional
  on the ``refilled_at`` it computed from and on ``live < cap``: concurrent API instances
  never spend the same token twice, a burst cannot overshoot the cap, and no crash, lost
  response or throttle can leave a slot without its job or a job without its slot.
* The slot is given back in the transaction that ends the job (:mod:`.counters`). A manual
  retry or a redrive puts a finished job back live through the same admission
  (:func:`retry_admitted`): a token, and the slot under the cap, in the transaction that
  re-queues it.
* One item takes ~1,000 writes/s, and each admitted job writes it twice (the slot taken, then
  given back), both transactional (2 units each): ~250 jobs/s. A tenant whose rate needs more
  has its bucket and cap split over :meth:`Limits.shard_count` items (rate, burst and cap
  divided evenly); admission starts on a random shard and, refused there, tries others
  before answering 429. The job row records its shard (``admission_shard``, absent: 0), so the
  terminal transaction gives the slot back where it was taken. Shard 0 is the tenant's own
  item, so rows and items written before sharding keep working.
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

from leasehold.aws.dynamo import Cancelled, condition_failed, from_av, to_av
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
    #: Items the bucket and the cap are split over (None: as many as the rate needs, at
    #: :data:`JOBS_PER_SHARD` admitted jobs/s each; 1 at the default rate).
    shards: int | None = None

    def shard_count(self) -> int:
        """How many admission items a tenant's rate needs; never so many that one shard's
        burst or cap falls below one job."""
        wanted = self.shards or math.ceil(self.rate / JOBS_PER_SHARD)
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
#: Shards an admission tries before answering 429 (each try after the first costs a read or
#: a refused write). A tenant with at most this many items (a rate up to 1,600 jobs/s) is
#: tried on every one, so it is never refused while one of them has room; a bigger one may
#: be, near its limits, when the tries all land on full items.
MAX_SHARD_TRIES = 8

#: What an API instance last saw of a tenant's bucket: (tokens, refilled_at). A correct guess
#: saves the read; a wrong one fails the write's condition, which returns the real item.
Buckets = dict[str, tuple[float, int | None]]  # by admission item key


def _bucket(item: Mapping[str, Any], limits: Limits) -> tuple[float, int | None]:
    old = item.get("refilled_at")
    return (float(item.get("tokens", limits.burst)), None if old is None else int(old))


#: What an admission adds to the item it spends a token on, by shard: a live slot (``live``:
#: 1), and for a retried job on its own shard its outcome taken back (``count_DEAD``: -1).
Adds = Callable[[int], Mapping[str, int]]


def _spend(app: Leasehold, tenant: str, key: str, limits: Limits,
           state: tuple[float, int | None], *, adds: Mapping[str, int]
           ) -> tuple[dict[str, Any], tuple[float, int]]:
    """The tenant update that spends a token (and adds ``adds``: a live slot), and the bucket
    after it.

    Raises :class:`RateLimited` when the bucket is empty.
    """
    tokens, old = state
    now = app.now()
    elapsed = 0.0 if old is None else max(0, now - old) / 1000
    available = min(limits.burst, tokens + elapsed * limits.rate)
    if available < 1:
        raise RateLimited(
            f"tenant {tenant!r} is over its rate of {limits.rate:g} submissions/s",
            retry_after=max(1, math.ceil((1 - available) / limits.rate)))
    stamp = max(now, old or 0)  # never move time backwards (clock skew between hosts)
    left = round(available - 1, 6)
    values: dict[str, Any] = {":t": Decimal(str(left)), ":now": stamp, ":cap": limits.max_live}
    fresh = "attribute_not_exists(refilled_at)" if old is None else "refilled_at = :old"
    if old is not None:
        values[":old"] = old
    expression = "SET tokens = :t, refilled_at = :now"
    names = {f"#a{i}": name for i, name in enumerate(adds)}
    if adds:
        expression += " ADD " + ", ".join(f"#a{i} :a{i}" for i in range(len(adds)))
        values.update({f":a{i}": amount for i, amount in enumerate(adds.values())})
    update = {
        "TableName": app.settings.tenants_table, "Key": {"tenant": {"S": key}},
        "UpdateExpression": expression,
        "ConditionExpression": f"{fresh} AND (attribute_not_exists(live) OR live < :cap)",
        "ExpressionAttributeValues": to_av(values),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
    if names:
        update["ExpressionAttributeNames"] = names
    return update, (left, stamp)


def _refused(item: Mapping[str, Any], tenant: str, limits: Limits) -> tuple[float, int | None]:
    """Why the tenant update's condition failed: the cap (raised), or another request spent a
    token since our view of the bucket (its state, to try again with)."""
    if int(item.get("live", 0)) >= limits.max_live:
        raise RateLimited(f"tenant {tenant!r} has {limits.max_live} live jobs, its limit; "
                          "wait for some to finish", retry_after=5)
    return _bucket(item, limits)


def _state(app: Leasehold, key: str, limits: Limits, buckets: Buckets
           ) -> tuple[float, int | None]:
    state = buckets.get(key)
    if state is None:
        state = _bucket(from_av(app.clients.dynamodb.get_item(
            TableName=app.settings.tenants_table, Key={"tenant": {"S": key}},
            ConsistentRead=True).get("Item", {})), limits)
    return state


class _Refused(Exception):
    def __init__(self, item: Mapping[str, Any]) -> None:
        super().__init__()
        self.item = item


def _admit(app: Leasehold, tenant: str, pool: str, limits: Limits, backlog: Backlog | None,
           buckets: Buckets | None, attempts: int, *, adds: Adds,
           write: Callable[[dict[str, Any], int], T], spent: Callable[[T], bool]) -> T:
    """Backlog (503), then the tenant update (a token, and what ``adds`` says) made by
    ``write`` on one of the tenant's admission shards: a random one first, then others
    while they refuse (at most :data:`MAX_SHARD_TRIES`), so a tenant is not refused while
    its rate or cap has room on another shard."""
    if backlog is not None:
        backlog.check(app, pool, limits)
    buckets = {} if buckets is None else buckets
    shards = limits.shard_count()
    order = random.sample(range(shards), min(shards, MAX_SHARD_TRIES))
    refusal: RateLimited | None = None
    for shard in order:
        try:
            return _admit_on(app, tenant, shard, limits.per_shard(shards, shard), buckets,
                             attempts, adds=adds, write=write, spent=spent)
        except RateLimited as refused:
            refusal = refused if refusal is None or refused.retry_after < \
                refusal.retry_after else refusal
    assert refusal is not None
    if shards == 1:
        raise refusal
    raise RateLimited(f"tenant {tenant!r} is over its rate of {limits.rate:g} submissions/s "
                      f"or its {limits.max_live} live jobs", retry_after=refusal.retry_after)


def _admit_on(app: Leasehold, tenant: str, shard: int, limits: Limits, buckets: Buckets,
              attempts: int, *, adds: Adds, write: Callable[[dict[str, Any], int], T],
              spent: Callable[[T], bool]) -> T:
    """The update on one admission shard, tried again from the bucket a refusal shows until
    the rate or cap says no."""
    key = slot_item(tenant, shard)
    state = _state(app, key, limits, buckets)
    for _ in range(attempts):
        try:
            update, after = _spend(app, tenant, key, limits, state, adds=adds(shard))
        except RateLimited:
            buckets.pop(key, None)  # re-read next time: other instances may refill it
            raise
        try:
            result = write(update, shard)
        except _Refused as refused:
            state = _refused(refused.item, tenant, limits)
            continue
        if spent(result):
            buckets[key] = after
        return result
    raise RateLimited(f"tenant {tenant!r} is submitting too fast", retry_after=1)


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

    def size(self, app: Leasehold, pool: str) -> int:
        with self._lock:
            cached = self._cache.get(pool)
        if cached is not None and time.monotonic() - cached[0] < self._ttl:
            return cached[1]
        total = sum(app.queues.visible(pool, priority) for priority in PRIORITIES)
        with self._lock:
            self._cache[pool] = (time.monotonic(), total)
        return total

    def check(self, app: Leasehold, pool: str, limits: Limits) -> None:
        if pool in app.settings.pools and self.size(app, pool) >= limits.max_backlog:
            raise Overloaded(f"pool {pool!r} has a backlog of {limits.max_backlog}+ jobs",
                             retry_after=10)
