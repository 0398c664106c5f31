"""Job state events from the change stream of the jobs table.

An event follows every committed change of a job row and never one that did not commit,
because it is made from the row's images in the stream, not by the process that wrote it (a
worker killed between its batch's commit and its PutEvents used to lose those events for
good). Delivery is at least once: a batch whose events could not all be published is
reported failed and read again. Every event carries ``detail.event_id``, stable across
redeliveries (:func:`event_id`), so a consumer dedupes on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from leasehold.aws.dynamo import from_av
from leasehold.core.jobs import Job, job_from_item
from leasehold.core.states import JobState
from leasehold.events.publishing import Sink, job_event, wanted

Record = Mapping[str, Any]
log = logging.getLogger(__name__)


def event_id(job: Job) -> str:
    """The id of the event for ``job`` entering its state: one per (job, epoch, state)."""
    return f"{job.job_id}:{job.epoch}:{job.state.value}"


def sequence_number(record: Record) -> str:
    return str(record["dynamodb"]["SequenceNumber"])


def changes(records: Iterable[Record]) -> Iterator[tuple[Job, JobState | None]]:
    """Each committed job change in ``records``: the new row and the state it left (None for
    a row just created). Removals and items that are not job rows carry no event."""
    for record in records:
        images = record.get("dynamodb", {})
        new = images.get("NewImage")
        if record.get("eventName") not in ("INSERT", "MODIFY") or not new or "state" not in new:
            continue
        job = job_from_item(from_av(new))
        old = images.get("OldImage")
        source = JobState(from_av(old)["state"]) if old and "state" in old else None
        yield job, source


def changed_at(job: Job, fallback: int) -> int:
    """When the row entered its state: its last transition's time (the writer's clock at
    the commit, as an inline event's), else ``fallback``."""
    last = job.history[-1] if job.history else None
    return last.at if last is not None and last.target == job.state.value else fallback


def events(records: Iterable[Record], publish: str, now: int) -> list[dict[str, Any]]:
    """The events that ``publish`` (``all``, ``terminal``, ``none``) wants for ``records``,
    each timed by its change, not by the relay (``now`` only where the row does not say)."""
    out = []
    for job, source in changes(records):
        if wanted(publish, job, source):
            event = job_event(job, source, changed_at(job, now))
            event["detail"]["event_id"] = event_id(job)
            out.append(event)
    return out


def relay(records: Sequence[Record], sink: Sink, publish: str,
          now: Callable[[], int], *,
          hand_off: Callable[[Sequence[Record]], object] | None = None) -> list[str]:
    """Hand off the jobs ``enqueue_item`` created (``hand_off``, see
    :mod:`leasehold.streams.enqueue`), then publish the events of ``records`` (in stream
    order); returns the sequence numbers to read again (ReportBatchItemFailures: from the
    first one on, the batch is retried; a repeated hand-off is fenced by the lease)."""
    if not records:
        return []
    if hand_off is not None:
        try:
            hand_off(records)
        except Exception:
            log.exception("relay: hand-off failed; the batch is read again")
            return [sequence_number(records[0])]
    batch = events(records, publish, now())
    lost = sink.publish_all(batch) if batch else 0
    return [sequence_number(records[0])] if lost else []
