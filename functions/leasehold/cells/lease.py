"""The Region lease, pure: when a cell may work, and when it must renew or read again.

A cell works while ``now`` is before the end of the last lease it wrote (or read) at its
Region's current epoch, less the clock skew allowed between machines. The end is measured
from the time the renewal was *sent*, never from when its answer came back, so a slow or
lost answer can only shorten the time a cell believes it holds the lease.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LeaseView:
    """What this cell knows of its own Region lease."""

    #: The Region's epoch the lease was written at (a failover bumps it).
    epoch: int
    #: Until when (ms) the lease lets the cell work, by this cell's clock.
    valid_until: int
    #: When (ms) the cell last wrote or read it.
    seen_at: int


NONE = LeaseView(epoch=0, valid_until=0, seen_at=0)


def lease_end(sent_at: int, lease_ms: int) -> int:
    """Until when a lease written at ``sent_at`` holds (the control table keeps this)."""
    return sent_at + lease_ms


def working_until(view: LeaseView, skew_ms: int) -> int:
    """The last moment (ms, exclusive) this cell may lease or finish a job on ``view``: the
    lease's end less the skew, so another Region's clock, running ahead, never sees the
    lease over while this cell still works under it."""
    return view.valid_until - skew_ms


def holds(view: LeaseView, now: int, skew_ms: int) -> bool:
    return now < working_until(view, skew_ms)


def due_for_renewal(view: LeaseView, now: int, lease_ms: int) -> bool:
    """Renew at a third of the lease: two renewals may fail before the cell stops."""
    return now >= view.seen_at + lease_ms // 3


def fenced_within(lease_ms: int, skew_ms: int) -> int:
    """The most time (ms) a cell cut off from the control table keeps working after its
    last successful renewal: the lease itself (less the skew it already gives up)."""
    return max(0, lease_ms - skew_ms)
