"""``leasehold.enqueue_item``: the facade of transactional enqueue.

The entries are built by :mod:`leasehold.streams.enqueue`, which needs the composed
application (its tables, tasks and settings); core never imports it. The composition root
installs it (``leasehold.compose.compose()``), as the client installs ``task.submit``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from leasehold.errors import LeaseholdError

Enqueuer = Callable[..., list[dict[str, Any]]]
_enqueuers: list[Enqueuer] = []


def install_enqueuer(enqueue: Enqueuer) -> None:
    """Make :func:`enqueue_item` build its entries with ``enqueue`` (the last app composed)."""
    _enqueuers[:] = [enqueue]


def enqueue_item(task: Any, payload: Any = None, *, tenant: str,
                 **options: Any) -> list[dict[str, Any]]:
    """``TransactWriteItems`` entries (boto3 client shape) that create a job of ``task`` for
    ``tenant`` if and only if the transaction you add them to commits: the job's ``Put``
    and its tenant's live-job slot, in that order. Spread them into your own
    ``transact_write_items(TransactItems=[..., *entries])``; the change-stream relay hands the
    job off. Options as ``POST /jobs`` takes them, but not ``unique`` or ``debounce``."""
    if not _enqueuers:
        raise LeaseholdError("leasehold.enqueue_item needs the application: call "
                             "leasehold.compose.compose() once in this process (it reads "
                             "the stack's tables and your tasks from the environment)")
    return _enqueuers[0](task, payload, tenant=tenant, **options)
