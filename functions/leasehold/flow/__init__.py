"""Keyed flow control: concurrency slots, throttles and pauses, enforced at the lease.

Installed from ``compose.py`` only (:func:`install`): the lifecycle never imports this
package. It hooks in through the store: a :class:`~leasehold.lifecycle.store.LeaseGate` that
adds the slot and the throttle's turn to the lease's transaction, a companion that gives the
slot back in the transaction that ends the attempt, an observer that wakes the next parked
job after that commit, and the ``cleared`` attributes that keep the parked index exact.
See docs/design.md, "Flow control".
"""

from __future__ import annotations

from leasehold.flow.gate import install

__all__ = ["install"]
