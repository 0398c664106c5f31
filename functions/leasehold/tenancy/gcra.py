"""The rate of an admission item as GCRA (the generic cell rate algorithm): its update, the
catch-up after an idle spell, and what an API instance remembers of each item (see
:mod:`leasehold.tenancy.admission`)."""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.dynamo import condition_failed, contended, from_av, to_av
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy.limits import SLOT_FREE, Limits

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
class Gcra:
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
    def of(cls, limits: Limits) -> Gcra:
        interval = max(_MS, (Decimal(1000) / Decimal(str(limits.rate))).quantize(_MS))
        tolerance = (Decimal(str(max(0.0, limits.burst - 1))) * interval).quantize(_MS)
        return cls(interval, tolerance, (tolerance / 2).quantize(_MS))

    def retry_after(self, tat: Decimal, now: int) -> int:
        return max(1, math.ceil((tat - self.tolerance - now) / 1000))

    def most(self) -> int:
        """Submissions one item takes at once when its bucket is full (its burst)."""
        return int(self.tolerance / self.interval) + 1

    def room(self, tat: Decimal | None, now: int) -> int:
        """Submissions the item takes at once now, its ``tat`` being ``tat`` (None: none
        yet, or one fallen behind and caught up: a full bucket)."""
        if tat is None or tat < now:
            return self.most()
        return max(0, min(self.most(), int((now + self.tolerance - tat) / self.interval) + 1))


def rate_update(app: Leasehold, key: str, limits: Limits, gcra: Gcra, now: int, *,
                adds: Mapping[str, int], count: int = 1) -> dict[str, Any]:
    """The item's update: ``count`` submissions' worth of rate (a batch takes several at
    once), and ``adds`` (a live slot), conditioned on the rate (the last of them arriving
    within the tolerance) and on ``live < cap``, and on nothing a caller remembers: only
    writes that really used up the rate or the cap can refuse it (or, rarely, a ``tat`` that
    fell behind ``now - lag``, which :func:`catch_up` moves first). ``count`` is at most
    :meth:`Gcra.most` (an item without ``tat`` passes the condition whatever it is)."""
    names = {"#tat": TAT, "#live": "live", **{f"#o{i}": n for i, n in enumerate(_LEGACY)}}
    rate = "(attribute_not_exists(#tat) OR #tat BETWEEN :lo AND :hi)"
    values: dict[str, Any] = {":T": gcra.interval * count, ":now": now,
                              ":lo": now - gcra.lag,
                              ":hi": now + gcra.tolerance - gcra.interval * (count - 1)}
    condition = rate
    if limits.max_live is not None:  # no cap: the rate alone (and no #live to name)
        values[":cap"] = limits.max_live
        condition = f"{rate} AND {SLOT_FREE}"
    else:
        del names["#live"]
    expression = "SET #tat = if_not_exists(#tat, :now) + :T"
    if adds:
        names.update({f"#a{i}": name for i, name in enumerate(adds)})
        values.update({f":a{i}": amount for i, amount in enumerate(adds.values())})
        expression += " ADD " + ", ".join(f"#a{i} :a{i}" for i in range(len(adds)))
    expression += " REMOVE " + ", ".join(f"#o{i}" for i in range(len(_LEGACY)))
    return {
        "TableName": app.settings.tenants_table, "Key": {"tenant": {"S": key}},
        "UpdateExpression": expression,
        "ConditionExpression": condition,
        "ExpressionAttributeNames": names, "ExpressionAttributeValues": to_av(values),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}


def catch_up(app: Leasehold, key: str, gcra: Gcra, now: int) -> Decimal | None:
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


def remember_read(buckets: Buckets, key: str, tat: Decimal) -> None:
    """``tat`` as DynamoDB returned it: exact when read."""
    with _BUCKETS_LOCK:
        bound = buckets.get(key, (tat, tat))[0]
        buckets[key] = (max(bound, tat), tat)


def remember_spent(buckets: Buckets, key: str, read: Decimal | None, gcra: Gcra,
                   now: int) -> None:
    """One admission's interval added to what this instance knows of the item: the write
    added ``T`` to a ``tat`` of at least ``now - lag`` (its condition) and at least ``read``
    (a lower bound when it was read), or to ``now`` when there was none."""
    lowest = now - gcra.lag
    with _BUCKETS_LOCK:
        bound, estimate = buckets.get(key, (lowest, lowest))
        buckets[key] = (max(bound, max(read or lowest, lowest) + gcra.interval),
                        max(estimate, lowest) + gcra.interval)
