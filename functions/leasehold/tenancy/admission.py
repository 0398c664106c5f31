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
  ``UpdateItem`` outside the transaction (:func:`~leasehold.tenancy.gcra.catch_up`), so
  concurrent catch-ups cost refused writes, never transactions. No crash, lost response or
  throttle can leave a slot without its job or a job without its slot.
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
* A tenant without a cap (``Limits.max_live`` None) holds no slots: its rate token is a plain
  conditional ``UpdateItem`` on an admission item (:func:`check`), and the job is the row's
  own conditional put, uncounted, finished later by one conditional update. No transaction
  either way: 4 write units less per job. A cap set later counts the live jobs in
  (:func:`leasehold.tenancy.backfill.count_in_live_jobs`); see docs/design.md, "A cap is an
  option".
"""

from __future__ import annotations

import logging
import random
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any, TypeVar

from botocore.exceptions import ClientError

from leasehold.aws.dynamo import Cancelled, condition_failed, contended, from_av, to_av
from leasehold.core.jobs import Job
from leasehold.core.spec import JobSpec
from leasehold.errors import Conflict, Overloaded, RateLimited
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.handoff import Pending
from leasehold.lifecycle.submission import ADMISSION_SHARD, COUNTED, SLOT_AT, Submitted, submit
from leasehold.tenancy import slots
from leasehold.tenancy.backlog import Backlog
from leasehold.tenancy.counters import add, outcome_item, slot_item
from leasehold.tenancy.gcra import (
    TAT,
    Buckets,
    Gcra,
    catch_up,
    rate_update,
    remember_read,
    remember_spent,
)
from leasehold.tenancy.limits import (
    JOBS_PER_SHARD,
    MAX_SHARD_TRIES,
    SLOT_FREE,
    SPREAD,
    Limits,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = ["JOBS_PER_SHARD", "SPREAD", "TAT", "Backlog", "Buckets", "Gcra", "Limits",
           "check", "retry_admitted", "slot_admitted", "submit_admitted"]


#: What an admission adds to the item it spends a token on, by shard: a live slot (``live``:
#: 1), and for a retried job on its own shard its outcome taken back (``count_DEAD``: -1).
Adds = Callable[[int], Mapping[str, int]]


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
    gcra = Gcra.of(limits)
    for _ in range(attempts):
        now = app.now()
        known, estimate = buckets.get(key, (None, None))
        if known is not None and known > now + gcra.tolerance:
            raise _OverRate(gcra.retry_after(known, now))
        if estimate is not None and estimate < now - gcra.lag:
            caught = catch_up(app, key, gcra, now)
            if caught is not None:
                remember_read(buckets, key, caught)
                known = max(known or caught, caught)
                if known > now + gcra.tolerance:
                    continue
        update = rate_update(app, key, limits, gcra, now, adds=adds(shard))
        try:
            result = write(update, shard)
        except _Refused as refused:
            if limits.max_live is not None and \
                    int(refused.item.get("live", 0)) >= limits.max_live:
                raise _AtCap from None
            seen = refused.item.get(TAT)
            if seen is not None:
                remember_read(buckets, key, Decimal(str(seen)))
            continue
        except ClientError as exc:
            if contended(exc):
                raise _Contended from None
            raise
        if spent(result):
            remember_spent(buckets, key, known, gcra, now)
        return result
    raise _Contended


def _slot(_: int) -> Mapping[str, int]:
    return {"live": 1}


def submit_admitted(app: Leasehold, spec: JobSpec, pool: str, limits: Limits,
                    backlog: Backlog | None = None, buckets: Buckets | None = None,
                    *, attempts: int = 5, internal: bool = False, prepaid: bool = False,
                    handoffs: list[Pending] | None = None) -> Submitted:
    """Admission for one job and its creation: backlog (503), rate (429), live cap (429).
    ``internal``: Leasehold submits one of its own tasks (``leasehold.bulk``).
    ``prepaid``: a tenant without a cap whose token the caller took already (a batch's, in
    one update: :mod:`leasehold.tenancy.tokens`); ``handoffs``: see ``submit``.

    With a cap, the token and the slot are one conditional update of an admission item,
    made just before the row's conditional put (no transaction: :mod:`.slots`); a replay
    spends a token and gives the slot back, and one refused at the cap whose job exists
    is answered as a replay (200). Without a cap the token is spent first, by its own
    conditional update, and the row is one conditional put: a replay spends a token (and,
    over the rate, gets 429 like any submission; its job is kept).
    """
    if not limits.capped:
        if not prepaid:
            check(app, spec.tenant, pool, limits, backlog, buckets, attempts=attempts)
        return submit(app, spec, counted=False, internal=internal, handoffs=handoffs)

    def take(row: Job) -> tuple[Job, Callable[[], None]]:
        # The slot by its own conditional update before the row is put (no transaction:
        # leasehold.tenancy.slots), and a refusal handed over as for any admission.
        def write(update: dict[str, Any], shard: int) -> tuple[int, int]:
            at, token = app.now(), secrets.token_hex(8)
            try:
                app.clients.dynamodb.update_item(**slots.counting(update, at, token))
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
                item = from_av(exc.response.get("Item") or {})  # type: ignore[arg-type]
                if not slots.ours(item, token):
                    raise _Refused(item) from None
                # botocore's retry of a try that landed (its response lost): ours, once
            return shard, at

        shard, at = _admit(app, spec.tenant, pool, limits, backlog, buckets, attempts,
                           adds=_slot, write=write, spent=lambda _: True)
        extra = {k: v for k, v in row.extra.items() if k != ADMISSION_SHARD}
        extra |= {COUNTED: True, SLOT_AT: at, **({ADMISSION_SHARD: shard} if shard else {})}

        def undo() -> None:
            slots.give_back(app, spec.tenant, shard, at)

        return replace(row, extra=extra), undo

    return submit(app, spec, counted=True, internal=internal, handoffs=handoffs, take=take)


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
                   actor: str = "api", reason: str = "manual retry", attempts: int = 5,
                   job: Job | None = None, writes: Sequence[Mapping[str, Any]] = (),
                   remove: Sequence[str] = ()) -> Job:
    """Re-run a DEAD or CANCELLED job through admission, as a submission: backlog (503), rate
    (429) and, for a job the API admitted, a live slot under the cap (429), all in the one
    transaction that puts the job back in QUEUED.

    The outcome the finished job counted is taken back with it, from the ledger that
    counted it: a counted job's from its admission item (in the slot's update when the slot
    is on that item, else by a second update in the transaction: one transaction cannot
    write an item twice), an uncounted one's from an outcome item. A lost response is
    recognised by the job row's fenced condition (``store.transition``), so nothing is
    taken twice.

    ``job``: the finished job as the caller read and checked it (a reset from a step, which
    also re-runs a SUCCEEDED job); ``writes``, ``remove``: what that re-run also commits
    (its record deletions) and removes (its hold).
    """
    job = job or control.finished(app, job_id, tenant)
    # The re-run holds a slot when the tenant has a cap now, whatever the job held before
    # (a cap set or lifted since). Its outcome is taken back from the ledger that counted
    # it: a counted job's from the admission item that counted it (``home``), an uncounted
    # one's from its tenant's outcome items, where the observer counted it. The observer
    # takes it back itself only when the re-run is uncounted (it cannot tell what the row
    # held before), so the two crossings are written here:
    # * uncounted before, counted now: taken back on an outcome item, in this transaction
    #   (taking it from an admission item left those items one short of their counted
    #   jobs' outcomes, and the outcome items one over, for good);
    # * counted before, uncounted now (a cap lifted): taken back on ``home`` and moved to an
    #   outcome item, from which the observer then takes it back.
    counted = limits.capped
    home = int(job.extra.get(ADMISSION_SHARD) or 0) if job.extra.get(COUNTED) else None
    outcome = {f"count_{job.state.value}": -1}
    moved = {f"count_{job.state.value}": 1}

    def adds(shard: int) -> Mapping[str, int]:
        if not counted:
            # A token only (the job holds no slot); a counted job's outcome taken back on
            # the token's own item when that is its home (one operation per item).
            return dict(outcome) if home == shard else {}
        return {"live": 1, **outcome} if home == shard else {"live": 1}

    def write(update: dict[str, Any], shard: int) -> Job:
        also = [{"Update": update}]
        if home is None:
            if counted:
                also.append(add(app.settings, outcome_item(job.tenant, job.job_id), outcome))
        elif not counted:
            if home != shard:
                also.append(add(app.settings, slot_item(job.tenant, home), outcome))
            also.append(add(app.settings, outcome_item(job.tenant, job.job_id), moved))
        elif home != shard:
            also.append(add(app.settings, slot_item(job.tenant, home), outcome))
        try:
            return control.requeue(app, job, actor=actor, reason=reason,
                                   also=[*also, *writes], shard=shard if counted else -1,
                                   remove=remove)
        except Cancelled as cancelled:
            if not cancelled.failed(1):  # a companion refused it (a unique key held)
                raise Conflict(f"job {job_id} cannot run again now: {cancelled}",
                               job_id=job_id) from None
            raise _Refused(cancelled.items[1] or {}) from None

    return _admit(app, job.tenant, job.pool, limits, backlog, buckets, attempts, adds=adds,
                  write=write, spent=lambda _: True)


def slot_admitted(app: Leasehold, tenant: str, limits: Limits,
                  write: Callable[[dict[str, Any], int], T]) -> T:
    """A live slot under the cap for a job made inside work the tenant was already admitted
    for (a durable job's child): the cap applies, the submission rate does not (it guards
    the front door, as for ``enqueue_item``).

    ``write(update, shard)`` commits the slot's ``Update`` (item 1 of its transaction, after
    the row) with the job; without a cap it is called once with no update and shard -1 (the
    job holds no slot); a refusal of item 1 moves to another of the tenant's admission
    items (at most :data:`MAX_SHARD_TRIES`). :class:`RateLimited` when every item tried is
    full: the tenant is at its cap.
    """
    if limits.max_live is None:
        return write({}, -1)  # no cap: no slot (shard -1), the job is written alone
    shards = limits.shard_count()
    for shard in random.sample(range(shards), min(shards, MAX_SHARD_TRIES)):
        update = {"TableName": app.settings.tenants_table,
                  "Key": {"tenant": {"S": slot_item(tenant, shard)}},
                  "UpdateExpression": "ADD #live :one", "ConditionExpression": SLOT_FREE,
                  "ExpressionAttributeNames": {"#live": "live"},
                  "ExpressionAttributeValues": to_av({
                      ":one": 1, ":cap": limits.per_shard(shards, shard).max_live})}
        try:
            return write(update, shard)
        except Cancelled as cancelled:
            if not cancelled.failed(1):
                raise
    raise RateLimited(f"tenant {tenant!r} has {limits.max_live} live jobs, its limit; wait "
                      "for some to finish", retry_after=5)
