"""Retention: when DynamoDB may delete a finished job or workflow (its TTL attribute).

A row carries :data:`PURGE_AT` (epoch *seconds*, as DynamoDB TTL wants) only while it is
terminal: the store's one transition primitive writes it on entry to SUCCEEDED, DEAD,
CANCELLED or EXPIRED and removes it on every other entry (a manual retry or redrive puts a
finished job back live and takes its TTL away in the same conditional write). So a live row
never carries one, whatever path it took. DynamoDB deletes an expired row within a few days
of its TTL, never before it.

Why 30 days by default: a job's row is what the API, the console and ``result()`` read, and a
month covers the questions asked of a finished job (a weekly report, an incident review, a
retry after a holiday), while bounding the table at about 30 days of traffic (at a million
jobs a day: 30 million rows, not 365 million a year and growing). ``0`` keeps rows forever.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leasehold.core.states import JobState
from leasehold.errors import ValidationError

#: The TTL attribute of the jobs and workflows tables (epoch seconds).
PURGE_AT = "purge_at_s"
#: A job's own retention, when it asked for one at submission (``retention_days``).
RETENTION_DAYS = "retention_days"
DEFAULT_RETENTION_DAYS = 30
#: The longest a job may ask to be kept (ten years; DynamoDB TTL takes any future time).
MAX_RETENTION_DAYS = 3653
DAY_SECONDS = 24 * 3600


def purge_at(state: JobState, now_ms: int, days: int) -> int | None:
    """The TTL a row entering ``state`` at ``now_ms`` must carry; None: it must carry none."""
    if not state.terminal or days <= 0:
        return None
    return now_ms // 1000 + days * DAY_SECONDS


def days_for(extra: Mapping[str, Any], default: int) -> int:
    """The retention of a job: its own ``retention_days`` if it asked for one, else the stack's."""
    own = extra.get(RETENTION_DAYS)
    return default if own is None else int(own)


def check_days(fieldname: str, value: object) -> int:
    """A retention in whole days, 0 (keep forever) to :data:`MAX_RETENTION_DAYS`."""
    if isinstance(value, bool) or not isinstance(value, int) or \
            not 0 <= value <= MAX_RETENTION_DAYS:
        raise ValidationError(fieldname, f"must be a whole number of days, 0 (keep forever) "
                                         f"to {MAX_RETENTION_DAYS}")
    return value


def row_purge_at(extra: Mapping[str, Any], state: JobState, now_ms: int, default: int
                 ) -> int | None:
    """The TTL of a job row entering ``state``: :func:`purge_at` with the job's retention.

    A workflow's step gets none of its own: its workflow may still be running (or be retried)
    long after the step finished, so the workflow stamps its steps once it is settled
    (:mod:`leasehold.workflows.retention`).
    """
    if "workflow_id" in extra:
        return None
    return purge_at(state, now_ms, days_for(extra, default))
