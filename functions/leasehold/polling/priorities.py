"""Which of a pool's three queues a busy polling worker asks first (see
:mod:`leasehold.polling.poller`)."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

from leasehold.settings import PRIORITIES

DEFAULT_WEIGHTS: Mapping[str, int] = {"high": 6, "normal": 3, "low": 1}


class PriorityPicker:
    """Smooth weighted round-robin (as nginx balances upstreams): deterministic, fair."""

    def __init__(self, weights: Mapping[str, int] = DEFAULT_WEIGHTS,
                 priorities: Sequence[str] = PRIORITIES) -> None:
        if any(weights.get(p, 0) < 1 for p in priorities):
            raise ValueError("every priority needs a weight of at least 1, or it could starve")
        self._weights = {p: weights[p] for p in priorities}
        self._current = dict.fromkeys(priorities, 0)
        self._total = sum(self._weights.values())
        self._lock = threading.Lock()

    def order(self) -> list[str]:
        """The queue to poll first this time, then the others by priority."""
        with self._lock:
            for priority, weight in self._weights.items():
                self._current[priority] += weight
            first = max(self._current, key=lambda p: self._current[p])
            self._current[first] -= self._total
        return [first, *(p for p in self._weights if p != first)]
