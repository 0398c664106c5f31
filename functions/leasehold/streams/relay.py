"""Job state events from the change stream of the jobs table.

An event follows every committed change of a job row and never one that did not commit,
because it is made from the row's images in the stream, not by the process that wrote it (a
worker killed between its batch's commit and its PutEvents used to lose those events for
good). Delivery is at least once: a batch whose events could not all be published is
reported failed and read again. Every event carries ``detail.event_id`` (:func:`event_id`):
one per committed change of the row, the same as the process that made the change gives it
when it publishes inline, and the same however often the record is read, so a consumer
dedupes on it.

A record is a change when the row's change counter moved
(:data:`~leasehold.lifecycle.store.CHANGES`): a write that changes no state (a heartbeat, a
sweep bound, a parked job's index keys) is no event, as no observer hears of it inline.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.events.publishing import Sink, event_id, job_event, wanted
from leasehold.lifecycle.store import CHANGES
from leasehold.streams.images import Record, Undecodable, job_of, sequence_number

__all__ = [
    "CHANGES",
    "Undecodable",
    "change",
    "changed_at",
    "changes",
    "event_id",
    "events",
    "readable",
    "relay",
    "sequence_number",
]

log = logging.getLogger(__name__)


def change(record: Record) -> tuple[Job, JobState | None] | None:
    """The committed state change in ``record``: the row as it left it and the state it left
    (None for a row just created); None for a removal, a row that is not a job's, or a write
    that changed no state (the change counter did not move). Raises :class:`Undecodable`."""
    if record.get("eventName") not in ("INSERT", "MODIFY"):
        return None  # REMOVE, a TTL deletion (DynamoDB Local names it UNKNOWN_TO_SDK_VERSION)
    job = job_of(record)
    if job is None:
        return None
    old = job_of(record, "OldImage")
    if old is None:
        return job, None
    counted = job.extra.get(CHANGES)
    if counted is not None and old.extra.get(CHANGES) == counted:
        return None  # not a state change (a row written before the counter: the old rule)
    return job, old.state


def readable(records: Iterable[Record]) -> tuple[list[tuple[Job, JobState | None]], int]:
    """The changes in ``records`` in order, up to the first one that cannot be decoded, and
    how many records they cover (``len(records)`` when every one could be)."""
    found = []
    count = 0
    for record in records:
        try:
            this = change(record)
        except Undecodable:
            log.exception("relay: a stream record cannot be decoded; the relay stops before it")
            break
        count += 1
        if this is not None:
            found.append(this)
    return found, count


def changes(records: Iterable[Record]) -> Iterator[tuple[Job, JobState | None]]:
    """Each committed job change in ``records`` (see :func:`change`); raises
    :class:`Undecodable` at a record that cannot be decoded."""
    for record in records:
        this = change(record)
        if this is not None:
            yield this


def changed_at(job: Job, fallback: int) -> int:
    """When the row entered its state: its last transition's time (the writer's clock at
    the commit, as an inline event's), else ``fallback``."""
    last = job.history[-1] if job.history else None
    return last.at if last is not None and last.target == job.state.value else fallback


def events(found: Iterable[tuple[Job, JobState | None]], publish: str, now: int
           ) -> list[dict[str, Any]]:
    """The events that ``publish`` (``all``, ``terminal``, ``none``) wants for the changes
    ``found``, each timed by its change, not by the relay (``now`` only where the row does
    not say)."""
    return [job_event(job, source, changed_at(job, now)) for job, source in found
            if wanted(publish, job, source)]


def relay(records: Sequence[Record], sink: Sink, publish: str,
          now: Callable[[], int], *,
          hand_off: Callable[[Sequence[Record]], object] | None = None) -> list[str]:
    """Hand off the jobs ``enqueue_item`` created and remove what features keep for the
    rows removed (``hand_off``, see :mod:`leasehold.streams.removals`), then publish the
    events of ``records`` (in stream order); returns the sequence numbers to read again
    (ReportBatchItemFailures: from the one returned on, the batch is retried; a repeated
    hand-off is fenced by the lease, a repeated removal finds less to delete).

    A record that cannot be decoded stops the batch: those before it go out, and it is
    returned (the deployed mapping retries it, then gives its range to the on-failure
    destination; the local relay retries it, then sets it aside)."""
    if not records:
        return []
    found, count = readable(records)
    head = records[:count]
    if hand_off is not None and head:
        try:
            hand_off(head)
        except Exception:
            log.exception("relay: hand-off failed; the batch is read again")
            return [sequence_number(records[0])]
    batch = events(found, publish, now())
    lost = sink.publish_all(batch) if batch else 0
    if lost:
        return [sequence_number(records[0])]
    return [sequence_number(records[count])] if count < len(records) else []
