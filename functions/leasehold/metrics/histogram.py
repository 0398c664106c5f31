"""The fixed histogram the per-task figures keep: pure bucketing and percentiles.

Durations and queue waits fall into :data:`BOUNDS` (upper bounds, seconds; the last is
open-ended). Counts per bucket add up across minutes and hours, which is what lets them be
kept with atomic ``ADD`` and summed at read time; a percentile is read off the cumulative
counts as the upper bound of the bucket it falls in (so p99 "≤ 30 s" means between the
bucket's lower and upper bound: the error is at most one bucket's width).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: Upper bounds of the buckets in seconds; the last bucket holds everything longer.
BOUNDS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
                             1800, 3600, math.inf)


def bucket(seconds: float) -> int:
    """The index of the bucket ``seconds`` falls in (a negative span counts as 0)."""
    for index, bound in enumerate(BOUNDS):
        if seconds <= bound:
            return index
    return len(BOUNDS) - 1


def percentile(counts: Sequence[int], q: float) -> float | None:
    """The upper bound of the bucket holding the ``q`` quantile (0 < q <= 1); None when
    empty. The open last bucket answers ``inf``."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = math.ceil(q * total)
    seen = 0
    for index, count in enumerate(counts):
        seen += count
        if seen >= rank:
            return BOUNDS[index]
    return BOUNDS[-1]
