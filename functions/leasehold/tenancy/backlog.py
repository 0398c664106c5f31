"""The global backlog limit: a pool's visible messages, looked at briefly cached (see
:mod:`leasehold.tenancy.admission`)."""

from __future__ import annotations

import threading
import time

from leasehold.errors import Overloaded
from leasehold.lifecycle.app import Leasehold
from leasehold.settings import PRIORITIES
from leasehold.tenancy.limits import Limits


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
        # While one submission looks, the others answer from the last look (a count SQS
        # itself calls approximate) instead of waiting for it: under load that wait was a
        # tenth of the API's time (bench/profile_api.py). Only a first look is waited for.
        stale = self._last(pool)
        if not self._looking.acquire(blocking=stale is None):
            assert stale is not None
            return stale
        try:
            cached = self._fresh(pool)
            if cached is not None:
                return cached
            total = sum(app.queues.visible(pool, priority) for priority in PRIORITIES)
            with self._lock:
                self._cache[pool] = (time.monotonic(), total)
            return total
        finally:
            self._looking.release()

    def _last(self, pool: str) -> int | None:
        with self._lock:
            cached = self._cache.get(pool)
        return None if cached is None else cached[1]

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
