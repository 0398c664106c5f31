"""Drive jobs through the real queues and worker, one step at a time."""

from __future__ import annotations

from leasehold.aws.queues import Received
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.worker import Worker
from leasehold.settings import PRIORITIES


def receive_all(app: Leasehold, pool: str = "default") -> list[Received]:
    messages: list[Received] = []
    for priority in PRIORITIES:
        url = app.queues.url(pool, priority)
        while batch := app.queues.receive(url, max_messages=10):
            messages += batch
    return messages


def deliver(app: Leasehold, worker: Worker | None = None, pool: str = "default",
            *, once: bool = False) -> int:
    """Receive and process visible messages as Lambda batches; returns how many.

    ``once``: one receive per queue, so a retry sent meanwhile waits for the next call.
    """
    worker = worker or Worker(app)
    count = 0
    for priority in PRIORITIES:
        url = app.queues.url(pool, priority)
        while batch := app.queues.receive(url, max_messages=10):
            consume(worker, batch)
            count += len(batch)
            if once:
                break
    return count


def dlq_bodies(app: Leasehold, pool: str = "default", priority: str = "normal") -> list[str]:
    url = app.queues.dlq_url(pool, priority)
    return [m.body for m in app.queues.receive(url, max_messages=10)]
