"""A tenant's admission limits, and how they are spread over its admission items (see
:mod:`leasehold.tenancy.admission`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from leasehold.settings import (
    DEFAULT_MAX_BACKLOG,
    DEFAULT_TENANT_BURST,
    DEFAULT_TENANT_MAX_LIVE,
    DEFAULT_TENANT_RATE,
    Settings,
)

#: The condition a live slot is taken under, on an admission item (names ``#live`` the
#: item's count of live jobs; ``:cap`` is the item's share of the live cap). Admission's rate
#: update and ``enqueue_item``'s slot entry both take it.
SLOT_FREE = "(attribute_not_exists(#live) OR #live < :cap)"


@dataclass(frozen=True, kw_only=True)
class Limits:
    #: Submissions per second a tenant earns, and how many it may spend at once.
    rate: float = DEFAULT_TENANT_RATE
    burst: float = DEFAULT_TENANT_BURST
    #: Non-terminal jobs a tenant may have; None: no cap (``LEASEHOLD_TENANT_MAX_LIVE=0``).
    #: A capped tenant's jobs are counted on its admission items: the slot is taken by the
    #: rate's own update before the row is put and given back by one more update after the
    #: end (issue 46, ``.slots``), and its row keeps its ``sweep`` entry (not sent first, so
    #: a lost worker is taken over at its lease's end): two write units more per job than
    #: without a cap; without a cap a job is admitted by its row's conditional put and
    #: finished by one conditional update, with no slot at all.
    max_live: int | None = DEFAULT_TENANT_MAX_LIVE
    #: Visible messages across a pool's queues above which every submission gets 503.
    max_backlog: int = DEFAULT_MAX_BACKLOG
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
        cap = wanted if self.max_live is None else self.max_live
        return max(1, min(wanted, int(self.burst), cap))

    @property
    def capped(self) -> bool:
        """Whether the tenant's live jobs are counted and held under :attr:`max_live`."""
        return self.max_live is not None

    def per_shard(self, shards: int, shard: int = 0) -> Limits:
        """The share of item ``shard`` of ``shards``: rate and burst divided evenly, the cap
        split exactly (the first ``max_live % shards`` items take one more), so the items
        together admit the whole cap and never more."""
        if shards == 1:
            return self
        cap = None if self.max_live is None else \
            self.max_live // shards + (1 if shard < self.max_live % shards else 0)
        return replace(self, rate=self.rate / shards, burst=self.burst / shards, max_live=cap)

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        """The deployment's limits for every tenant (before its plan, :mod:`.plans`): the
        settings every function reads alike (``LEASEHOLD_TENANT_*``), never an environment
        variable one function reads for itself."""
        return cls(rate=settings.tenant_rate, burst=settings.tenant_burst,
                   max_live=settings.tenant_max_live or None,  # 0: no cap
                   max_backlog=settings.max_backlog,
                   shards=settings.tenant_admission_shards or None)

    def shown(self) -> dict[str, Any]:
        """The limits as ``/stats`` shows them."""
        return {"rate": self.rate, "burst": self.burst, "max_live": self.max_live,
                "max_backlog": self.max_backlog, "admission_items": self.shard_count()}


#: Admitted jobs/s one admission item sustains: ~1,000 write units/s per partition key, and
#: a job cost 4 there while its slot moved in transactions (2 units each way): 250, of which
#: admission plans for 80%. Its slot's own update and give-back now cost 2 (issue 46), so
#: this leaves room.
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
