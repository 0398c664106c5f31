"""The jobs table store's foundation: its settings, table and client, its observers and
companions, and the reads every part of it shares (see :mod:`leasehold.lifecycle.store`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from botocore.exceptions import ClientError

from leasehold.aws.clients import Clients
from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import Cancelled, from_av, old_item, query, to_av
from leasehold.core.jobs import Job, job_from_item
from leasehold.core.states import JobState
from leasehold.errors import NotFound
from leasehold.settings import Settings

#: Marks a job that holds a live-job slot of its tenant (see ``leasehold.tenancy.admission``).
COUNTED = "counted"
#: Which of its tenant's admission items a counted job took its slot from (absent: 0).
ADMISSION_SHARD = "admission_shard"
#: When a counted job's slot was taken by its own write before the row was put (its
#: tenant's clock, ms): such a slot goes back by a write after the job ends, and the repair
#: of ``leasehold.tenancy.slots`` finds it by this time. Absent: the slot was taken and goes
#: back in a transaction with the row (a manual retry, a count-in, a durable child).
SLOT_AT = "slot_at"
#: A re-run's record of the slot its previous run held (``SLOT_AT`` and when it ended), so
#: that the repair still sees that slot's give-back as possibly in flight.
SLOT_WAS = "slot_was"
#: When a job with ``deadline_seconds`` must be finished by (UTC epoch ms): past it, the
#: worker that leases it ends it DEAD instead of running it, a sleep never outlasts it, and
#: a QUEUED job's hand-off deadline is never later than it (the sweeper ends a job held
#: past it: by its key, a throttle or a backlog).
DEADLINE = "deadline_at"

log = logging.getLogger(__name__)


#: The row's change counter: how many state changes it has committed (0 when created; +1 in
#: the same write by every transition and lease, never by a write that changes no state).
#: The job state events' id is (job, creation, counter): one per committed change, the same
#: whether the process that wrote it publishes or the stream relay does (see
#: ``leasehold.events.publishing.event_id``).
CHANGES = "changes"

#: Called after every change the store made: (the job as it is now, the state it left or None
#: when it was created). Events and workflows hook in here; an observer must not raise.
Observer = Callable[[Job, JobState | None], None]

#: Items that must be written in the same transaction as a transition, or not at all (a
#: tenant's live-job slot given back when its job finishes): given the job as the caller saw
#: it and the target state, the ``TransactWriteItems`` entries to add (usually none).
Companion = Callable[[Job, JobState], list[dict[str, Any]]]


class LeaseGate(Protocol):
    """Flow control at the lease (installed by ``leasehold.flow``; the store never imports it)."""

    def take(self, gate: Mapping[str, Any], job_id: str, epoch: int, now: int
             ) -> list[dict[str, Any]]:
        """The ``TransactWriteItems`` entries that must commit with this lease."""
        ...

    def refused(self, gate: Mapping[str, Any], job_id: str, epoch: int,
                cancelled: Cancelled | Refusal, now: int) -> bool:
        """The lease was refused by an entry of :meth:`take`: park or delay the job and
        return True, or return False to try the lease again (the refusal no longer holds)."""
        ...

    def contended(self, gate: Mapping[str, Any], job_id: str, epoch: int, now: int) -> bool:
        """Every try of the lease lost a race for the gate's entries (other leases kept
        taking the throttle's turns): hand the job off again shortly and return True, or
        return False to leave the message to come back when its visibility runs out."""
        ...


class Refusal(Exception):
    """Raised by :meth:`LeaseGate.take` when it refuses the lease without writing (a
    throttle's turn is later): ``until`` is when it may be granted."""

    def __init__(self, until: int) -> None:
        super().__init__(until)
        self.until = until


class StoreBase:
    """What every part of the store shares; :class:`~leasehold.lifecycle.store.DynamoJobStore`
    is the whole."""

    def __init__(self, clients: Clients, settings: Settings | None = None,
                 observers: list[Observer] | None = None) -> None:
        self.settings = settings or clients.settings
        self.table = self.settings.jobs_table
        self._clients = clients
        self.observers: list[Observer] = observers if observers is not None else []
        self.companions: list[Companion] = []
        #: Flow control at the lease (see :class:`LeaseGate`); None: gates are not enforced.
        self.lease_gate: LeaseGate | None = None
        #: Attributes a feature keeps on a QUEUED row only until its next change (a parked
        #: job's index keys): every lease through a gate and every transition removes them,
        #: unless the transition sets them.
        self.cleared: list[str] = []

    def _notify(self, job: Job, source: JobState | None) -> Job:
        for observer in self.observers:
            try:
                observer(job, source)
            except Exception:
                log.exception("observer %r failed on %s", observer, job.job_id)
        return job

    @property
    def _ddb(self) -> Any:
        return self._clients.dynamodb


    def get(self, job_id: str) -> Job:
        response = self._ddb.get_item(
            TableName=self.table, Key=job_key(job_id), ConsistentRead=True
        )
        if "Item" not in response:
            raise NotFound(f"no job {job_id}", job_id=job_id)
        return job_from_item(from_av(response["Item"]))

    def _update_or_refusal(self, update: Mapping[str, Any]
                           ) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """Apply one conditional ``UpdateItem``: (the row after it, {}) or, when its condition
        failed, (None, the row before it: {} when there is none)."""
        try:
            response = self._ddb.update_item(ReturnValues="ALL_NEW", **update)
        except ClientError as exc:
            old = old_item(exc)
            if old is None:
                raise
            return None, from_av(old) if old else {}
        return from_av(response["Attributes"]), {}

    def _query(self, index: str, condition: str, values: Mapping[str, Any],
               limit: int) -> Iterator[dict[str, Any]]:
        return query(self._ddb, limit=limit, TableName=self.table, IndexName=index,
                     KeyConditionExpression=condition,
                     ExpressionAttributeValues=to_av(values))
