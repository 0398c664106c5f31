"""What a thread keeps back until the batch it is in ends (see ``Leasehold.batch``).

Features that would write once per job (job state events, outcome counts) add to a
:class:`Deferred` instead; within a batch (a worker's batch of records, a ticker or sweeper
pass) the items wait and are handed to ``flush`` together when the outermost batch ends, so
ten jobs cost one request. Outside a batch :meth:`Deferred.add` says so and the caller acts
at once.

The batch is held in a context variable, so a call the batch's thread hands to a helper
thread with its context (``lifecycle/deadline.py``: an outcome write waited for only until a
deadline) adds to the same batch. An item added after its batch ended (a write abandoned at
its deadline that landed later) finds the batch closed and is acted on at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Generic, TypeVar

T = TypeVar("T")


class _Pending(Generic[T]):
    def __init__(self) -> None:
        self.items: list[T] = []
        self.open = True
        self.lock = threading.Lock()

    def add(self, item: T) -> bool:
        with self.lock:
            if self.open:
                self.items.append(item)
            return self.open

    def close(self) -> list[T]:
        with self.lock:
            self.open = False
            return self.items


class Deferred(Generic[T]):
    def __init__(self, flush: Callable[[list[T]], None]) -> None:
        self._flush_items = flush
        self._pending: ContextVar[_Pending[T] | None] = ContextVar(
            f"deferred-{id(self)}", default=None)

    def add(self, item: T) -> bool:
        """Keep ``item`` for the end of this thread's batch; False when not in one."""
        pending = self._pending.get()
        return pending is not None and pending.add(item)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Keep this thread's items until the outermost batch ends, then flush them.

        A batch that raises an error still flushes (the rows that changed before it did
        change); a dying process (a ``BaseException``) flushes nothing: a dead one writes
        nothing more.
        """
        if self._pending.get() is not None:
            yield  # nested: the outer batch flushes
            return
        pending: _Pending[T] = _Pending()
        token = self._pending.set(pending)
        try:
            yield
        except Exception:
            self._flush(pending)
            raise
        except BaseException:
            pending.close()
            raise
        else:
            self._flush(pending)
        finally:
            self._pending.reset(token)

    def _flush(self, pending: _Pending[T]) -> None:
        items = pending.close()
        if items:
            self._flush_items(items)
