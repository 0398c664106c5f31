"""Per-tenant back-pressure and counters, one item per tenant in the ``tenants`` table.

* A token bucket (``tokens``, ``refilled_at``) throttles submissions, and ``live`` counts the
  tenant's non-terminal jobs. Admission spends a token and reserves a live slot in ONE write,
  conditional on the ``refilled_at`` it computed from and on ``live < cap``: concurrent API
  instances never spend the same token twice, and a burst cannot overshoot the cap because
  the slot is taken *before* the job row is written.
* The store observer gives the slot back when a counted job (one the API admitted) reaches a
  terminal state, and counts the outcome in ``count_<STATE>`` for ``/stats``. It writes only
  when the live count changes, never on the transitions in between (lease, retry, re-drive):
  every write here lands on the tenant's one item, and per-job requests are what users pay.
* A global backlog limit (visible messages in the pool's queues) answers 503 before any of it.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.dynamo import condition_failed, from_av, to_av
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.errors import Overloaded, RateLimited
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import COUNTED
from leasehold.settings import PRIORITIES

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Limits:
    #: Submissions per second a tenant earns, and how many it may spend at once.
    rate: float = 50.0
    burst: float = 200.0
    #: Non-terminal jobs a tenant may have.
    max_live: int = 10_000
    #: Visible messages across a pool's queues above which every submission gets 503.
    max_backlog: int = 100_000

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Limits:
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, var, kind in (
            ("rate", "LEASEHOLD_TENANT_RATE", float), ("burst", "LEASEHOLD_TENANT_BURST", float),
            ("max_live", "LEASEHOLD_TENANT_MAX_LIVE", int),
            ("max_backlog", "LEASEHOLD_MAX_BACKLOG", int),
        ):
            if env.get(var):
                values[name] = kind(env[var])
        return cls(**values)


@dataclass
class _Slot:
    tenant: str
    used: bool = False


# The slot a submission reserved, so the creation observer (same thread, inside
# ``store.create``) counts the new job against it instead of adding a second time.
_reserved: ContextVar[_Slot | None] = ContextVar("leasehold_reserved_slot", default=None)


#: What an API instance last saw of a tenant's bucket: (tokens, refilled_at). A correct guess
#: saves the read; a wrong one fails the write's condition, which returns the real item.
Buckets = dict[str, tuple[float, int | None]]


def _bucket(item: Mapping[str, Any], limits: Limits) -> tuple[float, int | None]:
    old = item.get("refilled_at")
    return (float(item.get("tokens", limits.burst)), None if old is None else int(old))


def take_slot(app: Leasehold, tenant: str, limits: Limits, buckets: Buckets | None = None,
              *, attempts: int = 5) -> float:
    """Spend one token and reserve one live-job slot in one conditional write.

    Raises :class:`RateLimited` when the bucket is empty or the tenant is at its live-job cap.
    Returns the tokens left.
    """
    ddb = app.clients.dynamodb
    table = app.settings.tenants_table
    buckets = {} if buckets is None else buckets
    state = buckets.get(tenant)
    for _ in range(attempts):
        if state is None:
            state = _bucket(from_av(ddb.get_item(
                TableName=table, Key={"tenant": {"S": tenant}},
                ConsistentRead=True).get("Item", {})), limits)
        tokens, old = state
        now = app.now()
        elapsed = 0.0 if old is None else max(0, now - old) / 1000
        available = min(limits.burst, tokens + elapsed * limits.rate)
        if available < 1:
            buckets.pop(tenant, None)  # re-read next time: other instances may refill it
            raise RateLimited(
                f"tenant {tenant!r} is over its rate of {limits.rate:g} submissions/s",
                retry_after=max(1, math.ceil((1 - available) / limits.rate)))
        stamp = max(now, old or 0)  # never move time backwards (clock skew between hosts)
        left = round(available - 1, 6)
        values: dict[str, Any] = {":t": Decimal(str(left)), ":now": stamp, ":one": 1,
                                  ":cap": limits.max_live}
        if old is None:
            fresh = "attribute_not_exists(refilled_at)"
        else:
            fresh = "refilled_at = :old"
            values[":old"] = old
        try:
            ddb.update_item(
                TableName=table, Key={"tenant": {"S": tenant}},
                UpdateExpression="SET tokens = :t, refilled_at = :now ADD live :one",
                ConditionExpression=f"{fresh} AND (attribute_not_exists(live) OR live < :cap)",
                ExpressionAttributeValues=to_av(values),
                ReturnValuesOnConditionCheckFailure="ALL_OLD")
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            item = from_av(exc.response.get("Item") or {})  # type: ignore[arg-type]
            if int(item.get("live", 0)) >= limits.max_live:
                raise RateLimited(
                    f"tenant {tenant!r} has {limits.max_live} live jobs, its limit; "
                    "wait for some to finish", retry_after=5) from None
            state = _bucket(item, limits)  # another request spent a token: use what it left
            continue
        buckets[tenant] = (left, stamp)
        return left
    raise RateLimited(f"tenant {tenant!r} is submitting too fast", retry_after=1)


def _add(app: Leasehold, tenant: str, deltas: Mapping[str, int]) -> None:
    deltas = {k: v for k, v in deltas.items() if v}
    if not deltas:
        return
    names = {f"#a{i}": name for i, name in enumerate(deltas)}
    values = {f":v{i}": amount for i, amount in enumerate(deltas.values())}
    app.clients.dynamodb.update_item(
        TableName=app.settings.tenants_table, Key={"tenant": {"S": tenant}},
        UpdateExpression="ADD " + ", ".join(f"#a{i} :v{i}" for i in range(len(deltas))),
        ExpressionAttributeNames=names, ExpressionAttributeValues=to_av(values))


@contextmanager
def admit(app: Leasehold, tenant: str, pool: str, limits: Limits,
          backlog: Backlog | None = None, buckets: Buckets | None = None) -> Iterator[None]:
    """Admission for one submission: backlog (503), rate (429), live cap (429).

    The reserved live slot is released again unless the body created a job.
    """
    if backlog is not None:
        backlog.check(app, pool, limits)
    take_slot(app, tenant, limits, buckets)
    slot = _Slot(tenant)
    token = _reserved.set(slot)
    try:
        yield
    finally:
        _reserved.reset(token)
        if not slot.used:
            _add(app, tenant, {"live": -1})


def count_transition(app: Leasehold) -> Any:
    """A store observer keeping a tenant's ``live`` slots and outcome counts in step."""

    def observe(job: Job, source: JobState | None) -> None:
        if not job.extra.get(COUNTED):
            return  # internal jobs (schedules, workflow steps, library calls) hold no slot
        if source is None:
            slot = _reserved.get()
            if slot is not None and slot.tenant == job.tenant and not slot.used:
                slot.used = True  # the admission already took the slot
            else:
                _add(app, job.tenant, {"live": 1})
        elif source.live and job.state.terminal:
            _add(app, job.tenant, {"live": -1, f"count_{job.state.value}": 1})
        elif source.terminal and job.state.live:  # a manual retry takes a slot again
            _add(app, job.tenant, {"live": 1, f"count_{source.value}": -1})

    return observe


def counts(app: Leasehold, tenant: str) -> tuple[dict[str, int], int]:
    """Finished jobs by outcome, and live jobs, of one tenant (counters, never a scan).

    Only jobs submitted through the API are counted; live jobs are not split by state (that
    would cost a write on every transition; queue depths show QUEUED and RUNNING per pool).
    """
    item = from_av(app.clients.dynamodb.get_item(
        TableName=app.settings.tenants_table, Key={"tenant": {"S": tenant}},
        ConsistentRead=True).get("Item", {}))
    by_state = {state.value: max(0, int(item.get(f"count_{state.value}", 0)))
                for state in JobState if state.terminal}
    return by_state, max(0, int(item.get("live", 0)))


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
        total = 0
        for priority in PRIORITIES:
            attributes = app.clients.sqs.get_queue_attributes(
                QueueUrl=app.queues.url(pool, priority),
                AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
            total += int(attributes.get("ApproximateNumberOfMessages", 0))
        with self._lock:
            self._cache[pool] = (time.monotonic(), total)
        return total

    def check(self, app: Leasehold, pool: str, limits: Limits) -> None:
        if pool in app.settings.pools and self.size(app, pool) >= limits.max_backlog:
            raise Overloaded(f"pool {pool!r} has a backlog of {limits.max_backlog}+ jobs",
                             retry_after=10)
