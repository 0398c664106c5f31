"""Holds: what keeps a job from starting while it is left as it is (issue 36).

A hold is an attribute of the job row, not a state: a held job stays SCHEDULED, QUEUED,
SLEEPING or WAITING, keeps every way it has to wake (its due entry, its sweep entry, its
messages), and the lease refuses it (``attribute_not_exists`` in the lease's own condition,
``lifecycle/store_lease.py``), so no worker can start it whatever its timing. A held job
therefore holds no lease and no concurrency slot; the message that met the hold is done
with, and the hold's lifting hands the job off again.

- :data:`PAUSED_AT`: ``POST /jobs/{id}/pause`` (``lifecycle/pausing.py``), lifted by
  ``/resume`` only;
- :data:`RESET_FROM`: a reset from a step whose records take more than one write
  (``durable/reset.py``): set before the first deletion, removed by the write that re-runs
  the job, so a process killed in between leaves a job that cannot start with part of its
  records; the reset asked again finishes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leasehold.clock import iso

PAUSED_AT = "paused_at"
RESET_FROM = "reset_from"
#: Every hold: the lease refuses a row that carries any of them.
HOLDS = (PAUSED_AT, RESET_FROM)


def held(extra: Mapping[str, Any]) -> bool:
    return any(extra.get(name) is not None for name in HOLDS)


def reason(extra: Mapping[str, Any]) -> str | None:
    """Why a held job waits, for its view; None when it is not held."""
    if extra.get(RESET_FROM) is not None:
        return (f"held: a reset from step {extra[RESET_FROM]!r} is under way "
                "(ask for the reset again to finish it)")
    if extra.get(PAUSED_AT) is not None:
        return f"paused since {iso(int(extra[PAUSED_AT]))} (POST /jobs/{{id}}/resume)"
    return None
