"""A batch's rate in one update per admission item (``POST /jobs/batch``, issue 32).

A tenant without a live-job cap is admitted by its rate alone: one conditional ``UpdateItem``
per submission on one of its admission items (:func:`leasehold.tenancy.admission.check`).
A batch of n items would make n of them. Here the batch asks an item for as many as it has
room for in one update (``SET tat = tat + k T``, conditioned on the k-th arrival being within
the tolerance: :func:`~leasehold.tenancy.gcra.rate_update` with ``count=k``), and the next
item for the rest: at the default limits (burst 200 over 8 items) a batch of 100 takes its
tokens in 4 updates instead of 100. What each item may take is what ``k`` single admissions
in a row would have been allowed, so a batch is admitted exactly as its items would be one
by one (the same GCRA, the same items), only without the ``lag`` allowance a single
admission gets on an item that fell behind (a full bucket is the most).

Faults: a refused update returns the item, which says how much room it has; the batch asks
again for that much (a concurrent admission took some). A lost response retried by botocore
spends twice, or is refused and the batch takes less; either way only the rate is
over-counted, as a lost single token is (``check``): no job is made without its token, and
none is lost. A throttle past botocore's retries on one item moves to the next item.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from decimal import Decimal

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.aws.dynamo import condition_failed, from_av
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy.counters import slot_item
from leasehold.tenancy.gcra import (
    TAT,
    Buckets,
    Gcra,
    catch_up,
    rate_update,
    remember_read,
    remember_spent,
)
from leasehold.tenancy.limits import Limits

log = logging.getLogger(__name__)

#: Updates one admission item is asked before the batch moves to the next (each refused
#: one tells how much room the item has now).
TRIES_PER_ITEM = 3


@dataclass(frozen=True)
class Granted:
    #: Submissions admitted: the batch's first ``count`` items that need a token.
    count: int
    #: Seconds before the rest are worth sending again (429's ``Retry-After``).
    retry_after: int
    #: An admission item failed past botocore's retries: the rest are a 503, not a 429.
    unanswered: bool = False


def take(app: Leasehold, tenant: str, limits: Limits, wanted: int,
         buckets: Buckets | None = None) -> Granted:
    """Up to ``wanted`` submissions' worth of ``tenant``'s rate (a tenant without a cap),
    from its admission items in random order, one conditional update each."""
    buckets = {} if buckets is None else buckets
    shards = limits.shard_count()
    granted, waits, unanswered = 0, [], False
    for shard in random.sample(range(shards), shards):
        if granted >= wanted:
            break
        share = limits.per_shard(shards, shard)
        got, wait = _take_on(app, slot_item(tenant, shard), share, wanted - granted, buckets)
        granted += got
        if wait > 0:
            waits.append(wait)
        unanswered = unanswered or wait < 0
    return Granted(granted, min(waits) if waits else 1, unanswered and not waits)


def _take_on(app: Leasehold, key: str, limits: Limits, wanted: int,
             buckets: Buckets) -> tuple[int, int]:
    """(tokens taken from item ``key``, seconds until it has room again; 0: it gave what
    was asked, -1: it did not answer)."""
    gcra = Gcra.of(limits)
    known = buckets.get(key, (None, None))[0]
    for _ in range(TRIES_PER_ITEM):
        now = app.now()
        count = min(wanted, gcra.room(known, now))
        if count < 1:
            return 0, gcra.retry_after(known or Decimal(now), now)
        update = rate_update(app, key, limits, gcra, now, adds={}, count=count)
        try:
            app.clients.dynamodb.update_item(**update)
        except ClientError as exc:
            if not condition_failed(exc):
                log.warning("admission item %s did not answer; trying another", key,
                            exc_info=True)
                return 0, -1
            seen = from_av(exc.response.get("Item") or {}).get(TAT)  # type: ignore[arg-type]
            if seen is None:
                return 0, 1
            known = Decimal(str(seen))
            remember_read(buckets, key, known)
            if known < now - gcra.lag:  # fell behind: a full bucket once caught up
                caught = catch_up(app, key, gcra, now)
                known = None if caught is None or caught <= now else caught
            continue
        except BotoCoreError:
            log.warning("admission item %s did not answer; trying another", key,
                        exc_info=True)
            return 0, -1
        for i in range(count):
            remember_spent(buckets, key, None if known is None else known + i * gcra.interval,
                           gcra, now)
        return count, 0
    return 0, 1
