"""The lease gate: what a gated lease takes with it, and what happens when it is refused."""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

from leasehold.aws.dynamo import Cancelled
from leasehold.clock import iso
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.flow import slots, throttle, waking
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change, Refusal

log = logging.getLogger(__name__)


class FlowGate:
    """:class:`~leasehold.lifecycle.store.LeaseGate` for ``concurrency`` and ``throttle``.

    Entries in the lease's transaction: item 1 the slot (if the job has a concurrency key),
    then the throttle's turn. The throttle is taken last so that a job parked for a slot does
    not spend a turn.
    """

    def __init__(self, app: Leasehold) -> None:
        self.app = app

    def take(self, gate: Mapping[str, Any], job_id: str, epoch: int, now: int
             ) -> list[dict[str, Any]]:
        entries = []
        if (c := gate.get("concurrency")) is not None:
            tenant = str(c["slot"]).split("#", 1)[0]
            entries.append(slots.take(self.app.settings, c, tenant, job_id, epoch))
        if (t := gate.get("throttle")) is not None:
            entries.append(throttle.take(self.app.clients.dynamodb, self.app.settings, t, now))
        return entries

    def refused(self, gate: Mapping[str, Any], job_id: str, epoch: int,
                cancelled: Cancelled | Refusal, now: int) -> bool:
        app = self.app
        job = self._waiting(job_id, epoch)
        if job is None:
            return True
        concurrency = gate.get("concurrency")
        if isinstance(cancelled, Cancelled):
            if concurrency is not None and cancelled.failed(1):
                return waking.park(app, job, concurrency, cancelled.items[1], now)
            return False  # the throttle's turn was taken under us: read it again
        return self._delay(job, cancelled.until, now)

    def contended(self, gate: Mapping[str, Any], job_id: str, epoch: int, now: int) -> bool:
        """Other leases took the key's turns in every try (a burst of jobs on one key, woken
        at the same turn). Leaving the message to come back would delay the job by the
        queue's visibility timeout; hand it off again between one and two of the key's
        intervals from now instead, spread so that the losers do not meet again."""
        if (t := gate.get("throttle")) is None:
            return False
        job = self._waiting(job_id, epoch)
        if job is None:
            return True
        step = throttle.interval_ms(t)
        return self._delay(job, now + int(step * (1 + random.random())), now)

    def _waiting(self, job_id: str, epoch: int) -> Job | None:
        """The job if it still waits for this message's lease; None if another message or a
        cancel moved it on (nothing to wait for).

        A durable job's short sleep is leased straight from SLEEPING by its delayed message
        (``lifecycle/suspending.py``): refused, it waits exactly as a QUEUED job does (it
        is parked or delayed, and so becomes QUEUED). Left SLEEPING, nothing would wake it
        when the slot frees, only the sweeper at its hand-off deadline (issue 29).
        """
        try:
            job = self.app.store.get(job_id)
        except NotFound:
            return None
        waits = job.state in (JobState.QUEUED, JobState.SLEEPING) and job.epoch == epoch
        return job if waits else None

    def _delay(self, job: Job, until: int, now: int) -> bool:
        """Over its key's rate: hand the job off again at its turn (a new epoch fences any
        other message of it). Never dropped: late, at worst."""
        reason = f"throttled until {iso(until)}"
        try:
            new = self.app.store.transition(job, Change(
                target=JobState.QUEUED, actor=waking.ACTOR, reason=reason, bump_epoch=True,
                set={"run_at": until, waking.WAITING: reason,
                     "lease_expires_at": handoff.handoff_deadline(until, self.app.settings)}),
                now=now)
        except (Conflict, NotFound):
            return True
        handoff.send(self.app.queues, new, now)
        return True


def install(app: Leasehold) -> FlowGate:
    """Flow control on ``app``'s store (called by ``compose``)."""
    gate = FlowGate(app)
    app.store.lease_gate = gate
    app.store.cleared.extend(waking.CLEARED)
    app.store.companions.append(slots.release_writes(app.settings))
    app.store.observers.append(waking.Waker(app))
    return gate
