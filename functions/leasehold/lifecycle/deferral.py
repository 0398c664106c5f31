"""What a thread keeps back until the batch it is in ends (see ``Leasehold.batch``).

Features that would write once per job (job state events, outcome counts) add to a
:class:`Deferred` instead; within a batch (a worker's batch of records, a ticker or sweeper
pass) the items wait and are handed to ``flush`` together when the outermost batch ends, so
ten jobs cost one request. Outside a batch :meth:`Deferred.add` says so and the caller acts
at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class Deferred(Generic[T]):
    def __init__(self, flush: Callable[[list[T]], None]) -> None:
        self._flush_items = flush
        self._local = threading.local()

    def add(self, item: T) -> bool:
        """Keep ``item`` for the end of this thread's batch; False when not in one."""
        pending: list[T] | None = getattr(self._local, "pending", None)
        if pending is None:
            return False
        pending.append(item)
        return True

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Keep this thread's items until the outermost batch ends, then flush them.

        A batch that raises an error still flushes (the rows that changed before it did
        change); a dying process (a ``BaseException``) flushes nothing: a dead one writes
        nothing more.
        """
        if getattr(self._local, "pending", None) is not None:
            yield  # nested: the outer batch flushes
            return
        self._local.pending = []
        try:
            yield
        except Exception:
            self._flush()
            raise
        except BaseException:
            self._local.pending = None
            raise
        else:
            self._flush()

    def _flush(self) -> None:
        items, self._local.pending = self._local.pending, None
        if items:
            self._flush_items(items)
