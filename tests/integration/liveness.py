"""Liveness: every non-terminal job has a way to wake (docs/design.md, "Flow control:
concurrency keys, throttles, pauses", *Liveness*).

A job that is not finished is woken by one of:

* ``message``: a hand-off message of its current epoch is in a queue (visible, delayed or
  in flight); only the harness knows, so it passes them (:func:`messages_in_queues` reads
  them from the in-process moto);
* ``due``: an entry of the ``due`` index (``due_shard``, ``run_at``): the ticker promotes it;
* ``sweep``: an entry of the ``sweep`` index (``sweep_shard``, ``sweep_at``) no later than
  the row's deadline (its lease or hand-off deadline, and a QUEUED job's start window), and
  not below the sweeper's frontier of its shard (a pass still reads it): the sweeper
  re-drives, recovers or ends it;
* ``parked``: an entry of the ``parked`` index (``parked_key``): the write that frees a slot,
  or a resume, wakes it (and its sweep entry is the recheck if that wake-up is lost). It
  counts only while something will do that: the key's slot has a live holder (a RUNNING job
  at its epoch, whose end frees it), or the row has its recheck (a ``sweep`` way); a parked
  row on a free key with no recheck waits for nothing (issue 44);
* ``dependency``: WAITING for a workflow that exists (its steps release it, the workflow
  reconciler repairs a lost release, and a finished workflow winds its steps down).

:func:`assert_every_live_job_can_wake` checks it for every row of the jobs table; a
state-machine test calls it after every step with the messages it knows of.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from leasehold.aws.clients import Clients
from leasehold.aws.dynamo import from_av
from leasehold.aws.queues import Message
from leasehold.core.flowcontrol import START_BY
from leasehold.core.states import JobState
from leasehold.errors import NotFound, StaleMessage
from leasehold.flow import slots
from leasehold.lifecycle import sweep_frontier
from leasehold.lifecycle.app import Leasehold
from leasehold.settings import PRIORITIES
from leasehold.workflows.storage import DynamoWorkflowStore

#: A message of a job: (job_id, epoch).
Handoff = tuple[str, int]


@dataclass(frozen=True)
class WakePath:
    """One way a job will be woken: ``kind`` (see the module), and the latest time it fires
    (epoch ms; None: on an event, a freed slot or a finished dependency)."""

    kind: str
    at: int | None = None


def wake_paths(app: Leasehold, row: Mapping[str, Any], *,
               in_flight: Collection[Handoff] = (),
               frontier: Mapping[int, int] | None = None,
               dynamodb: Any | None = None) -> list[WakePath]:
    """The ways the job of raw ``row`` (a jobs-table item, index attributes included) will
    be woken; empty for a live job means it is stranded. ``frontier``: the sweeper's (read
    from the table if not given); ``dynamodb``: a client to read a parked row's slot with
    (default: a new one, without the test's injected faults)."""
    if frontier is None:
        frontier = sweep_frontier.load(app, Clients(app.settings).dynamodb)
    state = JobState(row["state"])
    if state.terminal:
        return []
    paths: list[WakePath] = []
    epoch = int(row.get("epoch", 0))
    # A RUNNING job's message of its epoch, in flight, is its sweeper when the row has no
    # sweep entry (sent first, issue 46): it shows again when its worker stops extending it.
    if state in (JobState.QUEUED, JobState.SLEEPING, JobState.RUNNING) and \
            (row["job_id"], epoch) in in_flight:
        paths.append(WakePath("message", int(row.get("run_at") or 0)))
    if state in (JobState.SCHEDULED, JobState.SLEEPING) and "due_shard" in row and \
            row.get("run_at") is not None:
        paths.append(WakePath("due", int(row["run_at"])))
    if state in (JobState.QUEUED, JobState.RUNNING, JobState.SLEEPING) and \
            "sweep_shard" in row and row.get("sweep_at") is not None:
        sweep_at = int(row["sweep_at"])
        bounds = [int(row.get("lease_expires_at") or 0)]
        if state is JobState.QUEUED and row.get(START_BY) is not None:
            bounds.append(int(row[START_BY]))
        if sweep_at <= min(bounds) and sweep_at >= frontier.get(int(row["sweep_shard"]), 0):
            paths.append(WakePath("sweep", sweep_at))
    if state is JobState.QUEUED and row.get("parked_key") and (
            any(path.kind == "sweep" for path in paths)
            or _slot_has_a_live_holder(app, str(row["parked_key"]), dynamodb)):
        paths.append(WakePath("parked"))
    if state is JobState.WAITING and row.get("workflow_id"):
        try:
            DynamoWorkflowStore(app.clients, app.settings).get(str(row["workflow_id"]))
        except NotFound:
            pass
        else:
            paths.append(WakePath("dependency"))
    return paths


def _slot_has_a_live_holder(app: Leasehold, slot: str, dynamodb: Any | None) -> bool:
    """Whether a RUNNING job at its epoch holds a place of ``slot`` (its end frees it)."""
    item = slots.read(dynamodb or Clients(app.settings).dynamodb, app.settings, slot)
    held = {member.rsplit("#", 1)[0]: int(member.rsplit("#", 1)[1])
            for member in slots.holders(item)}
    return any(job.state is JobState.RUNNING and job.epoch == held[job.job_id]
               for job in app.store.batch_get(sorted(held)))


def rows(app: Leasehold, dynamodb: Any | None = None) -> list[dict[str, Any]]:
    """Every row of the jobs table as stored (read with ``dynamodb``, e.g. a client without
    the test's injected faults)."""
    client = dynamodb or Clients(app.settings).dynamodb
    pages = client.get_paginator("scan").paginate(TableName=app.settings.jobs_table,
                                                  ConsistentRead=True)
    return [from_av(item) for page in pages for item in page["Items"]]


def assert_every_live_job_can_wake(app: Leasehold, *, in_flight: Collection[Handoff] = (),
                                   dynamodb: Any | None = None
                                   ) -> dict[str, list[WakePath]]:
    """Every non-terminal job has at least one :class:`WakePath`; ``in_flight``: the
    messages the harness knows are in a queue; ``dynamodb``: a client to read the table
    with (default: a new one, without the test's injected faults). Returns each live job's
    paths, for a test to assert which way a job it drove there waits."""
    found: dict[str, list[WakePath]] = {}
    frontier = sweep_frontier.load(app, dynamodb or Clients(app.settings).dynamodb)
    for row in rows(app, dynamodb):
        if JobState(row["state"]).terminal:
            continue
        paths = wake_paths(app, row, in_flight=in_flight, frontier=frontier,
                           dynamodb=dynamodb)
        assert paths, f"job {row['job_id']} ({row['state']}) has no way to wake: {row}"
        found[row["job_id"]] = paths
    return found


def messages_in_queues(app: Leasehold, pools: Collection[str] = ("default",)
                       ) -> set[Handoff]:
    """The hand-off messages in the app's queues (visible, delayed or received and not yet
    deleted), read from the in-process moto backend without receiving them (a receive
    would hide them, count towards their redrive, and reorder the test)."""
    from moto.sqs.models import sqs_backends  # the in-process moto only

    region = app.clients.sqs.meta.region_name
    found: set[Handoff] = set()
    for pool in pools:
        for priority in PRIORITIES:
            _, account, name = urlparse(app.queues.url(pool, priority)).path.split("/")
            queue = sqs_backends[account][region].queues[name]
            for message in list(queue._messages):
                try:
                    parsed = Message.parse(message.body)
                except StaleMessage:
                    continue
                found.add((parsed.job_id, parsed.epoch))
    return found
