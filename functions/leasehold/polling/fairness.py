"""The order a fair queue hands messages out in: the least busy message group (tenant) first.

SQS fair queues order by it on AWS; the polling worker orders each batch by it again by the
tenants it has in flight (:func:`leasehold.polling.poller.fair_order`), and the embedded
emulator makes moto's standard queues hand out messages by it
(:mod:`leasehold.local.fair_queues`). Pure: no AWS, no clock.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

M = TypeVar("M")


def fair_order(messages: Sequence[M], group_of: Callable[[M], str | None],
               in_flight: Mapping[str, int]) -> list[M]:
    """``messages`` (in send order) in the order a fair queue hands them out.

    Greedy: the next message is the oldest one of the group with the fewest messages in
    flight, counting those placed before it; ties go to the oldest message. A message
    without a group is a group of its own with nothing in flight. Deterministic.
    """
    # A group's key is its id; a message without one is keyed by its position instead.
    queues: dict[tuple[bool, str | int], deque[tuple[int, M]]] = {}
    for index, message in enumerate(messages):
        group = group_of(message)
        key: tuple[bool, str | int] = (True, group) if group is not None else (False, index)
        queues.setdefault(key, deque()).append((index, message))
    load = {key: in_flight.get(str(key[1]), 0) if key[0] else 0 for key in queues}
    heap = [(load[key], waiting[0][0], key) for key, waiting in queues.items()]
    heapq.heapify(heap)
    ordered: list[M] = []
    while heap:
        _, _, key = heapq.heappop(heap)
        waiting = queues[key]
        ordered.append(waiting.popleft()[1])
        load[key] += 1
        if waiting:
            heapq.heappush(heap, (load[key], waiting[0][0], key))
    return ordered


__all__ = ["fair_order"]
