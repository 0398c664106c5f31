"""SQS fair queues, emulated in the embedded emulator.

On AWS, a standard queue whose messages carry a ``MessageGroupId`` is a *fair queue*: when
one message group (a tenant) holds a disproportionate share of the queue's in-flight
messages, SQS returns the other groups' messages first whenever there are any, and among
several noisy groups it serves the one with the fewest in flight first. A message without a
group counts as a tenant of its own. Nothing is dropped or throttled: the noisy group's
messages are delivered as usual when no quiet group's are waiting.

moto's standard queues keep the group id but hand messages out in send order, so locally a
quiet tenant's job would wait behind another tenant's whole backlog. :func:`install` patches
moto's queue *in the emulator's process only* so that a receive on a standard queue takes
messages in :func:`leasehold.polling.fairness.fair_order`: always the group with the fewest
in-flight (received, not yet deleted, still invisible) messages next, counting the ones this
receive already took, send order within a group and between equals. That is AWS's order once
a group is detected as noisy; AWS detects it only past thresholds (about 10% of the queue's
in-flight messages and at least 30 of its own in flight, or 10% of the consumers' recent
processing time), which a laptop-sized runtime would rarely reach, so the emulation applies
it always. With no grouped message visible the order is moto's own (send order); FIFO queues
are left alone.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from leasehold.polling.fairness import fair_order


def install() -> None:
    """Make moto's standard queues fair queues in this process (the emulator's)."""
    from moto.sqs import models

    queue: Any = models.Queue
    if getattr(queue, "_leasehold_fair", False):
        return
    visible_in_send_order = queue.messages.fget

    def messages(self: Any) -> list[Any]:
        visible = visible_in_send_order(self)
        if self.fifo_queue or not any(m.group_id is not None for m in visible):
            return visible
        in_flight = Counter(m.group_id for m in self._messages
                            if m.group_id is not None and not m.visible)
        return fair_order(visible, lambda m: m.group_id, in_flight)

    queue.messages = property(messages)
    queue._leasehold_fair = True


__all__ = ["install"]
