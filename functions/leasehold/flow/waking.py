"""Parking a job that found its key's slots full, and waking the oldest when one frees.

A parked job stays QUEUED with no message anywhere: its row carries ``parked_key`` and
``parked_at`` (the sparse ``parked`` index) and a hand-off deadline ``flow_recheck_seconds``
ahead. Nothing polls it. The write that frees a slot (a store observer, after the commit, in
whatever process made it: a worker, the sweeper, a cancel) wakes the oldest parked job of the
key: a fenced QUEUED -> QUEUED change with a new epoch (so two wakers never wake the same job
for one slot) and a message. If that process dies between its commit and the wake, the
sweeper finds the parked row past its deadline and hands it off again: no parked job is
stranded for longer than one recheck period.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any

from leasehold.aws.definitions import PARKED_INDEX
from leasehold.aws.dynamo import Cancelled, query, to_av
from leasehold.core.flowcontrol import GATE
from leasehold.core.holds import held
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.flow import slots
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change
from leasehold.lifecycle.sweeper import RESENT_EPOCH

log = logging.getLogger(__name__)

ACTOR = "flow"
PARKED_KEY = "parked_key"
PARKED_AT = "parked_at"
#: Why a QUEUED job waits, for its view ("waiting for a slot of key K (2 of 2 in use)").
WAITING = "waiting_for"
#: The most parked jobs a wake-up looks through for one that can start (the ones before it
#: paused); past them the sweeper's recheck hands the next one off.
MAX_CANDIDATES = 100
#: What a parked or delayed row carries only until its next change.
CLEARED = (PARKED_KEY, PARKED_AT, WAITING)


def park(app: Leasehold, job: Job, concurrency: Mapping[str, Any],
         slot_item: Mapping[str, Any] | None, now: int) -> bool:
    """Park ``job`` (QUEUED, or a short sleep's SLEEPING, its lease refused by a full or
    paused slot; it is QUEUED once parked): True when parked or no longer ours to park,
    False when the slot freed meanwhile (lease again)."""
    key, limit = concurrency["key"], int(concurrency["limit"])
    if slot_item and slot_item.get(slots.PAUSED):
        reason = f"paused: key {key} is paused"
    else:
        reason = (f"waiting for a slot of key {key} "
                  f"({len(slots.holders(slot_item))} of {limit} in use)")
    change = Change(
        target=JobState.QUEUED, actor=ACTOR, reason=reason,
        set={PARKED_KEY: concurrency["slot"], PARKED_AT: job.extra.get(PARKED_AT) or now,
             WAITING: reason,
             "lease_expires_at": now + int(app.settings.flow_recheck_seconds * 1000)},
        # The sweeper's recheck must hand the job off again, not wait behind a backlog.
        remove=(RESENT_EPOCH,),
        also=[slots.still_full(app.settings, concurrency)])
    try:
        app.store.transition(job, change, now=now)
    except Cancelled:
        return False  # the slot is no longer full: lease again
    except (Conflict, NotFound):
        return True   # the job moved on (another message leased it, a cancel)
    return True


def parked(app: Leasehold, slot: str, limit: int) -> list[str]:
    """Ids of the oldest jobs parked on ``slot``, oldest first."""
    return [item["job_id"] for item in query(
        app.clients.dynamodb, limit=limit, TableName=app.settings.jobs_table,
        IndexName=PARKED_INDEX.name, KeyConditionExpression="parked_key = :k",
        ExpressionAttributeValues=to_av({":k": slot}))]


def candidates(app: Leasehold, slot: str, count: int) -> Iterator[Job]:
    """The jobs parked on ``slot``, oldest first, read ``count + 2`` at a time (a few more
    than slots: another waker may have taken the first ones), at most :data:`MAX_CANDIDATES`."""
    step = count + 2
    pages = query(app.clients.dynamodb, TableName=app.settings.jobs_table, Limit=step,
                  IndexName=PARKED_INDEX.name, KeyConditionExpression="parked_key = :k",
                  ExpressionAttributeValues=to_av({":k": slot}))  # read page by page
    ids = (item["job_id"] for item in islice(pages, MAX_CANDIDATES))
    while chunk := list(islice(ids, step)):
        yield from app.store.batch_get(chunk)


def wake(app: Leasehold, slot: str, count: int = 1) -> int:
    """Hand off up to ``count`` of the oldest jobs parked on ``slot`` that can start; how
    many it woke. A held job (paused: ``core/holds.py``) is passed over: its lease would be
    refused and the wake-up lost while the key is free; its resume hands it off."""
    if count <= 0:
        return 0
    now = app.now()
    woken = 0
    for job in candidates(app, slot, count):
        if woken >= count:
            break
        if job.state is not JobState.QUEUED or job.extra.get(PARKED_KEY) != slot or \
                held(job.extra):
            continue
        try:
            new = app.store.transition(job, Change(
                target=JobState.QUEUED, actor=ACTOR, reason="woken: a slot freed",
                bump_epoch=True,
                set={"lease_expires_at": handoff.handoff_deadline(now, app.settings)}),
                now=now)
        except (Conflict, NotFound):
            continue  # woken by another process first
        handoff.send(app.queues, new, now)
        woken += 1
    return woken


class Waker:
    """The store observer that wakes the next parked job when a RUNNING job lets its slot go.

    It runs after the commit, so it never slows or fails the write itself; the store logs
    what it raises, and the sweeper's recheck covers a wake-up that failed.
    """

    def __init__(self, app: Leasehold) -> None:
        self.app = app

    def __call__(self, job: Job, source: JobState | None) -> None:
        if source is not JobState.RUNNING or job.state is JobState.RUNNING:
            return
        gate = job.extra.get(GATE)
        if isinstance(gate, Mapping) and "concurrency" in gate:
            wake(self.app, gate["concurrency"]["slot"])
