"""Keyed flow control: options a job (or its task) asks for that shape when and whether it
runs. Concurrency slots, throttles and pauses are enforced at the lease (:mod:`.gate`);
unique keys, debounce windows and start windows at submission, the lease and the sweep
(:mod:`.unique`, :mod:`.debounce`, :mod:`.expiry`).

Installed from ``compose.py`` only: the lifecycle never imports this package. It hooks in
through the lifecycle's hooks: a :class:`~leasehold.lifecycle.store.LeaseGate` that adds the
slot and the throttle's turn to the lease's transaction, store companions that give a slot or
a claim back in the transaction that ends the job or attempt, an observer that wakes the next
parked job after that commit, submission intakes, lease refusals and sweeper hooks. See
docs/design.md, "Flow control".
"""

from __future__ import annotations

from leasehold.flow.gate import install

__all__ = ["install"]
