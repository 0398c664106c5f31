"""What the change-stream relay does with the commits it reads besides publishing events: it
hands off the jobs ``enqueue_item`` created (:func:`leasehold.streams.enqueue.hand_off`) and
tells the features of every job row that is gone (``app.removals``), so what they keep per
job (a durable job's records, its ``ctx.once`` results) lives exactly as long as its row.

A row is gone when the stream says ``REMOVE``: its retention TTL expired (DynamoDB deletes it
within days of its ``purge_at``; the record is a service deletion), or it was deleted
(``DELETE /jobs/{id}``, a bulk delete). A live row is never deleted (it carries no TTL and
the delete refuses it), so nothing a running or re-runnable job reads goes early. The
removals run before the batch is acknowledged: a relay that fails or dies half-way reads the
batch again, and the removals, which are idempotent, finish what was left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from leasehold.lifecycle.app import Leasehold
from leasehold.streams.enqueue import hand_off


def removed(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ids of the job rows ``records`` removed, in order (DynamoDB Local names a TTL
    deletion ``UNKNOWN_TO_SDK_VERSION``; its record has no ``NewImage`` either)."""
    ids = []
    for record in records:
        if record.get("eventName") in ("INSERT", "MODIFY"):
            continue
        stream = record.get("dynamodb", {})
        if stream.get("NewImage"):
            continue
        key = stream.get("Keys", {}).get("job_id", {}).get("S")
        if key:
            ids.append(key)
    return ids


def after_commit(app: Leasehold, records: Sequence[Mapping[str, Any]]) -> None:
    """The relay's work on ``records`` besides events: hand-offs, then removals. Raises if
    either could not finish (the relay reads the batch again; both are idempotent)."""
    hand_off(app, records)
    gone = removed(records)
    if gone and app.removals:
        # A derived id (an idempotency key's, a workflow step's, a trigger event's) may make
        # a new row after the old one went and before this batch is read: what it keeps
        # now is the new job's (one consistent read of the rows removed).
        again = {job.job_id for job in app.store.batch_get(gone)}
        gone = [job_id for job_id in gone if job_id not in again]
    if gone:
        for removal in app.removals:
            removal(app, gone)
