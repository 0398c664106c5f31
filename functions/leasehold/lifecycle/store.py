"""The jobs table: every write conditional, every transition fenced by state and epoch.

One primitive, :meth:`DynamoJobStore.transition`, performs every state change. It also keeps
the sparse index keys in step with the state (only SCHEDULED jobs carry ``due_shard``, only
QUEUED/RUNNING jobs carry ``sweep_shard`` and ``sweep_at``) so that no caller can forget them.

``sweep_at`` keeps one invariant: for every QUEUED or RUNNING job it is no later than the time
the row may need the sweeper (its hand-off deadline, or the expiry of any lease it has or may
still get). A lease and its heartbeats only push that time later, so they never touch the
index; the sweeper moves ``sweep_at`` forward itself (:meth:`DynamoJobStore.move_sweep`).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from botocore.exceptions import ClientError

from leasehold.aws.clients import Clients
from leasehold.aws.definitions import BY_TENANT_INDEX, DUE_INDEX, SWEEP_INDEX
from leasehold.aws.dynamo import (
    Cancelled,
    batch_get,
    condition_failed,
    from_av,
    old_item,
    query,
    query_page,
    to_av,
    transact_write,
    update_request,
)
from leasehold.core import retention
from leasehold.core.flowcontrol import GATE
from leasehold.core.ids import shard_of
from leasehold.core.jobs import Job, Transition, job_from_item, job_to_item
from leasehold.core.states import INITIAL, JobState, check
from leasehold.errors import Conflict, LeaseholdError, NotFound, StaleMessage
from leasehold.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Change:
    """One state change, as :meth:`JobStore.transition` applies it."""

    target: JobState
    actor: str
    reason: str = ""
    set: Mapping[str, Any] = field(default_factory=dict)
    remove: Sequence[str] = ()
    increment: Mapping[str, int] = field(default_factory=dict)
    #: Hand the job off anew: the old message (and any zombie holding it) is fenced off.
    bump_epoch: bool = False
    #: Only the lease holder may make this change.
    owner: str | None = None
    #: Refuse when a cancel was requested (a success or a retry must not hide a cancel).
    unless_cancel_requested: bool = False
    #: Only while the lease (or hand-off deadline) still ends before this time: a sweeper's
    #: change must lose to a heartbeat that landed after it read the row.
    expired_before: int | None = None
    #: Writes the caller commits with this change, in one transaction (an admission's token
    #: and slot when a finished job is put back live). Entry ``i`` is item ``i + 1`` of the
    #: :class:`~leasehold.aws.dynamo.Cancelled` raised when one of their conditions fails.
    also: Sequence[Mapping[str, Any]] = ()


class JobStore(Protocol):
    #: Called after every change the store made (see :data:`Observer`).
    observers: list[Observer]
    #: Writes that must commit with a transition, in one transaction (see :data:`Companion`).
    companions: list[Companion]
    lease_gate: LeaseGate | None
    cleared: list[str]

    def create(self, job: Job, *, also: Sequence[Mapping[str, Any]] = ()
               ) -> tuple[Job, bool]: ...
    def get(self, job_id: str) -> Job: ...
    def lease(self, job_id: str, epoch: int, *, owner: str, expires_at: int, now: int,
              actor: str, gate: Mapping[str, Any] | None = None) -> Job: ...
    def transition(self, job: Job, change: Change, *, now: int,
                   conflict: type[LeaseholdError] = Conflict) -> Job: ...
    def update_running(self, job: Job, *, owner: str, set: Mapping[str, Any],
                       conflict: type[LeaseholdError]) -> Job: ...
    def request_cancel(self, job: Job) -> Job: ...
    def sweep_candidates(self, shard: int, before: int, limit: int) -> list[str]: ...
    def move_sweep(self, job: Job, to: int) -> bool: ...
    def due(self, shard: int, until: int, limit: int) -> list[str]: ...
    def by_tenant(self, tenant: str, shard: int, *, limit: int,
                  cursor: Mapping[str, Any] | None = None, newest_first: bool = True,
                  bound: int | None = None
                  ) -> tuple[list[tuple[int, str]], Mapping[str, Any] | None]: ...
    def batch_get(self, job_ids: Sequence[str]) -> list[Job]: ...


#: Called after every change the store made: (the job as it is now, the state it left or None
#: when it was created). Events and workflows hook in here; an observer must not raise.
Observer = Callable[[Job, JobState | None], None]

#: Items that must be written in the same transaction as a transition, or not at all (a
#: tenant's live-job slot given back when its job finishes): given the job as the caller saw
#: it and the target state, the ``TransactWriteItems`` entries to add (usually none).
Companion = Callable[[Job, JobState], list[dict[str, Any]]]

#: The latest time (ms) a job may be leased for the first time, if a feature set one: the
#: lease refuses it past that, and the first lease removes it (a started job never expires).
START_BY = "start_by"

#: A random token each creation writes on its row, so that a retried put whose first try
#: landed recognises its own row instead of taking it for an idempotent replay.
WRITE_TOKEN = "write_token"


class _Refused(Exception):
    """A conditional update's condition failed; ``current`` is the row as DynamoDB saw it
    (returned with the failure, so nobody needs to read it again), or None if there is none."""

    def __init__(self, current: Job | None) -> None:
        super().__init__()
        self.current = current


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


#: Leases a gate may refuse in a row before the message is left to come back.
GATE_TRIES = 5


class Refusal(Exception):
    """Raised by :meth:`LeaseGate.take` when it refuses the lease without writing (a
    throttle's turn is later): ``until`` is when it may be granted."""

    def __init__(self, until: int) -> None:
        super().__init__(until)
        self.until = until


class Gated(StaleMessage):
    """The job waits for its flow control (parked for a slot, or delayed by a throttle):
    its message is done with; the gate hands it off again."""


class _NeedsGate(Exception):
    def __init__(self, gate: Mapping[str, Any]) -> None:
        super().__init__()
        self.gate = gate


class _GateRefused(Exception):
    def __init__(self, cancelled: Cancelled | Refusal) -> None:
        super().__init__()
        self.cancelled = cancelled


class ConditionFailed(LeaseholdError):
    """A conditional write found the job changed."""


def tenant_shard(tenant: str, shard: int) -> str:
    """The ``by_tenant_shard`` index key of a tenant's ``shard``."""
    return f"{tenant}#{shard}"


class DynamoJobStore:
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

    # -- creation and reads -------------------------------------------------------------

    def create(self, job: Job, *, also: Sequence[Mapping[str, Any]] = ()
               ) -> tuple[Job, bool]:
        """Put a new job; if the id exists, return the stored one and ``False``.

        ``also``: items written in the same transaction (the tenant's slot an admission
        takes). If one of their conditions fails, nothing is written and
        :class:`~leasehold.aws.dynamo.Cancelled` is raised for the caller to read.
        """
        check_initial(job.state)
        token = secrets.token_hex(8)
        item = job_to_item(job) | self._index_keys(job.job_id, job.state, job,
                                                   now=job.created_at) | {
            WRITE_TOKEN: token,
            "tenant_shard": tenant_shard(job.tenant,
                                         shard_of(job.job_id, self.settings.tenant_shards))}
        put = {"TableName": self.table, "Item": to_av(item),
               "ConditionExpression": "attribute_not_exists(job_id)",
               "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
        try:
            if also:
                transact_write(self._ddb, [{"Put": put}, *also])
            else:
                self._ddb.put_item(**put)
        except Cancelled as cancelled:
            if not cancelled.failed(0):
                raise
            return self._existing(job.job_id, cancelled.items[0], token)
        except ClientError as exc:
            old = old_item(exc)
            if old is None:
                raise
            return self._existing(job.job_id, from_av(old) if old else None, token)
        return self._notify(job, None), True

    def _existing(self, job_id: str, item: Mapping[str, Any] | None, token: str
                  ) -> tuple[Job, bool]:
        stored = job_from_item(item) if item else self.get(job_id)
        if stored.extra.get(WRITE_TOKEN) == token:
            # Our own put: its response was lost and the retry met it. The job is new.
            return self._notify(stored, None), True
        return stored, False

    def get(self, job_id: str) -> Job:
        response = self._ddb.get_item(
            TableName=self.table, Key={"job_id": {"S": job_id}}, ConsistentRead=True
        )
        if "Item" not in response:
            raise NotFound(f"no job {job_id}", job_id=job_id)
        return job_from_item(from_av(response["Item"]))

    def batch_get(self, job_ids: Sequence[str]) -> list[Job]:
        return [job_from_item(item)
                for item in batch_get(self._ddb, self.table, "job_id", job_ids)]

    # -- the one transition primitive ---------------------------------------------------

    def transition(self, job: Job, change: Change, *, now: int,
                   conflict: type[LeaseholdError] = Conflict) -> Job:
        """Apply ``change`` if the job is still in ``job.state`` at ``job.epoch``.

        ``job`` is the caller's view. Because every entry into QUEUED bumps the epoch, an
        unchanged (state, epoch) pair means no transition happened since that view was read,
        so the bounded history can be rewritten from it safely.
        """
        check(job.state, change.target)
        entry = Transition(now, job.state.value, change.target.value, change.actor, change.reason)
        history = (*job.history, entry)[-self.settings.history_limit:]
        sets: dict[str, Any] = {"state": change.target.value, "history": [
            t.to_item() for t in history]}
        sets.update(change.set)
        removes = list(change.remove) + [k for k in self.cleared if k not in sets]
        index = self._index_keys(job.job_id, change.target, None, sets, now=now)
        sets.update({k: v for k, v in index.items() if v is not None})
        removes += [k for k, v in index.items() if v is None and k not in sets]
        # Retention: a TTL only on terminal rows, removed on any way back to live.
        purge = retention.row_purge_at(job.extra, change.target, now,
                                       self.settings.retention_days)
        if purge is not None:
            sets[retention.PURGE_AT] = purge
        else:
            removes.append(retention.PURGE_AT)
        values: dict[str, Any] = {":source": job.state.value, ":epoch": job.epoch}
        condition = ["#state = :source", "epoch = :epoch"]
        if change.owner is not None:
            condition.append("lease_owner = :owner")
            values[":owner"] = change.owner
        if change.unless_cancel_requested:
            condition.append("attribute_not_exists(cancel_requested)")
        if change.expired_before is not None:
            condition.append("lease_expires_at < :expired_before")
            values[":expired_before"] = change.expired_before
        increments = dict(change.increment)
        if change.bump_epoch:
            increments["epoch"] = 1
        expected_epoch = job.epoch + (1 if change.bump_epoch else 0)
        companions = [*change.also, *(item for companion in self.companions
                                      for item in companion(job, change.target))]
        try:
            new = self._update(job.job_id, sets, removes, increments, condition, values,
                               companions, known=job)
        except _Refused as refused:
            return self._explain(job.job_id, refused.current, change, now, expected_epoch,
                                 conflict)
        return self._notify(new, job.state)

    def lease(self, job_id: str, epoch: int, *, owner: str, expires_at: int, now: int,
              actor: str, gate: Mapping[str, Any] | None = None) -> Job:
        """QUEUED -> RUNNING for the holder of message ``(job_id, epoch)``.

        The worker has not read the job (that would cost a request per job), so the history
        entry is appended rather than rewritten; the next transition trims it.

        ``gate``: the job's flow control as its message carries it. With a
        :attr:`lease_gate` installed, a gated job is leased only together with what the gate
        takes (a concurrency slot, a throttle's turn), in one transaction; a job whose row
        has a gate its message did not carry is leased that way too (the plain lease's
        condition refuses it). Refused by the gate, the job is parked or delayed by the gate
        and :class:`Gated` is raised.
        """
        entry = Transition(now, JobState.QUEUED.value, JobState.RUNNING.value, actor, "lease")
        for _ in range(GATE_TRIES):
            try:
                return self._lease(job_id, epoch, owner, expires_at, now, entry, gate)
            except _NeedsGate as needs:
                gate = needs.gate
            except _GateRefused as refused:
                assert self.lease_gate is not None and gate is not None
                if self.lease_gate.refused(gate, job_id, epoch, refused.cancelled, now):
                    raise Gated(f"job {job_id} waits (flow control)", job_id=job_id) from None
        raise Conflict(f"job {job_id}: its gate kept changing; the message comes back",
                       job_id=job_id)

    def _lease(self, job_id: str, epoch: int, owner: str, expires_at: int, now: int,
               entry: Transition, gate: Mapping[str, Any] | None) -> Job:
        update: dict[str, Any] = dict(
            TableName=self.table, Key={"job_id": {"S": job_id}},
            UpdateExpression=(
                "SET #state = :running, lease_owner = :owner, lease_expires_at = :exp, "
                "started_at = :now, first_started_at = if_not_exists(first_started_at, :now), "
                "attempt = if_not_exists(attempt, :zero) + :one, "
                "history = list_append(if_not_exists(history, :empty), :entry)"
            ),
            # A start window (leasehold.flow's expiry) refuses the lease once it has passed,
            # and a started job never expires: the lease removes it.
            # A durable job's short sleep is leased straight from SLEEPING by its delayed
            # message (see lifecycle/suspending.py).
            ConditionExpression=("#state IN (:queued, :sleeping) AND epoch = :epoch AND "
                                 f"(attribute_not_exists({START_BY}) OR {START_BY} > :now)"),
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=to_av({
                ":running": JobState.RUNNING.value, ":queued": JobState.QUEUED.value,
                ":sleeping": JobState.SLEEPING.value,
                ":owner": owner, ":exp": expires_at, ":now": now, ":zero": 0, ":one": 1,
                ":empty": [], ":entry": [entry.to_item()], ":epoch": epoch,
            }),
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        removed = [START_BY]
        gated = self.lease_gate is not None
        if gated and gate is None:
            # A gated row leased without its gate (a message from before it, a caller that
            # did not pass it): refused here, and leased again through the gate below.
            update["ConditionExpression"] += f" AND attribute_not_exists({GATE})"
        if gated and gate is not None:
            assert self.lease_gate is not None
            removed = list(dict.fromkeys([*removed, *self.cleared]))
        update["ExpressionAttributeNames"].update(
            {f"#c{i}": name for i, name in enumerate(removed)})
        update["UpdateExpression"] += " REMOVE " + ", ".join(
            f"#c{i}" for i in range(len(removed)))
        if gated and gate is not None:
            assert self.lease_gate is not None
            try:
                transact_write(self._ddb, [
                    {"Update": update}, *self.lease_gate.take(gate, job_id, epoch, now)])
            except Refusal as refusal:
                raise _GateRefused(refusal) from None
            except Cancelled as cancelled:
                if not cancelled.failed(0):
                    raise _GateRefused(cancelled) from None
                return self._not_leased(cancelled.items[0] or {}, job_id, epoch, owner, now)
            return self._notify(self.get(job_id), JobState.QUEUED)
        try:
            response = self._ddb.update_item(ReturnValues="ALL_NEW", **update)
        except ClientError as exc:
            old = old_item(exc)
            if old is None:
                raise
            return self._not_leased(from_av(old) if old else {}, job_id, epoch, owner, now)
        return self._notify(job_from_item(from_av(response["Attributes"])), JobState.QUEUED)

    def _not_leased(self, old: Mapping[str, Any], job_id: str, epoch: int, owner: str,
                    now: int) -> Job:
        """A lease's condition failed: our own lease (a retried request met it applied), a
        gated row leased without its gate, or a stale message (or one whose start window
        passed: the caller's refused-lease hooks end that job)."""
        current = job_from_item(old) if old else None
        if current is not None and current.state is JobState.RUNNING and \
                current.epoch == epoch and current.lease_owner == owner:
            # Our own lease: the retried request met it applied. Committed, so every
            # observer hears of it now, as the lost first response never told them.
            return self._notify(current, JobState.QUEUED)
        start_by = None if current is None else current.extra.get(START_BY)
        if current is not None and current.state in (JobState.QUEUED, JobState.SLEEPING) and \
                current.epoch == epoch and current.extra.get(GATE) and \
                (start_by is None or int(start_by) > now):
            raise _NeedsGate(current.extra[GATE])
        raise StaleMessage(f"message for {job_id} at epoch {epoch} is stale",
                           job_id=job_id, current=current) from None

    def update_running(self, job: Job, *, owner: str, set: Mapping[str, Any],
                       conflict: type[LeaseholdError]) -> Job:
        """Change attributes of a RUNNING job without a transition (heartbeats)."""
        try:
            return self._update(
                job.job_id, dict(set), [], {},
                ["#state = :running", "epoch = :epoch", "lease_owner = :owner"],
                {":running": JobState.RUNNING.value, ":epoch": job.epoch, ":owner": owner},
            )
        except _Refused as refused:
            raise conflict(job_id=job.job_id, current=refused.current) from None

    def request_cancel(self, job: Job) -> Job:
        """Flag a RUNNING job; its worker sees the flag at the next heartbeat."""
        try:
            return self._update(
                job.job_id, {"cancel_requested": True}, [], {},
                ["#state = :running", "epoch = :epoch"],
                {":running": JobState.RUNNING.value, ":epoch": job.epoch},
            )
        except _Refused:
            raise ConditionFailed(job_id=job.job_id) from None

    # -- index queries ------------------------------------------------------------------

    def sweep_candidates(self, shard: int, before: int, limit: int) -> list[str]:
        """Ids of QUEUED/RUNNING jobs whose ``sweep_at`` is before ``before``: a superset of the
        shard's expired leases and lost hand-offs (the caller reads the rows to tell them)."""
        return [item["job_id"] for item in self._query(
            SWEEP_INDEX.name, "sweep_shard = :s AND sweep_at < :t",
            {":s": shard, ":t": before}, limit)]

    def move_sweep(self, job: Job, to: int) -> bool:
        """Move a live job's ``sweep_at`` forward to ``to``; False if the row changed.

        Conditioned on the (state, epoch) the caller read and on the deadline still being at
        least ``to``, so the move can never put ``sweep_at`` past the time the row needs the
        sweeper. Nothing else changes, so a retried write whose first try landed simply
        succeeds again (it is idempotent).
        """
        try:
            self._ddb.update_item(
                TableName=self.table, Key={"job_id": {"S": job.job_id}},
                UpdateExpression="SET sweep_at = :to",
                ConditionExpression=("#state = :state AND epoch = :epoch AND "
                                     "lease_expires_at >= :to"),
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues=to_av({
                    ":to": to, ":state": job.state.value, ":epoch": job.epoch}),
            )
        except ClientError as exc:
            if condition_failed(exc):
                return False
            raise
        return True

    def due(self, shard: int, until: int, limit: int) -> list[str]:
        return [item["job_id"] for item in self._query(
            DUE_INDEX.name, "due_shard = :s AND run_at <= :t", {":s": shard, ":t": until}, limit)]

    def by_tenant(self, tenant: str, shard: int, *, limit: int,
                  cursor: Mapping[str, Any] | None = None, newest_first: bool = True,
                  bound: int | None = None
                  ) -> tuple[list[tuple[int, str]], Mapping[str, Any] | None]:
        """One page of one shard of a tenant's jobs: (created_at, job_id) in created_at order,
        from ``bound`` on (inclusive; older if ``newest_first``), and where the next resumes."""
        condition = "tenant_shard = :t"
        values: dict[str, Any] = {":t": tenant_shard(tenant, shard)}
        if bound is not None:
            condition += f" AND created_at {'<=' if newest_first else '>='} :b"
            values[":b"] = bound
        items, last = query_page(
            self._ddb, limit=limit, cursor=cursor, TableName=self.table,
            IndexName=BY_TENANT_INDEX.name, KeyConditionExpression=condition,
            ExpressionAttributeValues=to_av(values), ScanIndexForward=not newest_first)
        return [(int(item["created_at"]), item["job_id"]) for item in items], last

    # -- helpers ------------------------------------------------------------------------

    def _index_keys(self, job_id: str, state: JobState, job: Job | None,
                    sets: Mapping[str, Any] | None = None, *, now: int) -> dict[str, Any]:
        """The index attributes a job entering ``state`` at ``now`` must carry (None: must
        not carry). Only creation and :meth:`transition` call this; a lease enters RUNNING
        without it, because the ``sweep_at`` written on entry to QUEUED already bounds it."""
        shard = shard_of(job_id, self.settings.shards)
        keys: dict[str, Any] = {"due_shard": None, "sweep_shard": None, "sweep_at": None,
                                "lease_expires_at": None}
        # A SLEEPING job with a hand-off deadline was handed off (a short sleep): the
        # sweeper watches it as a QUEUED one, from its wake-up on; a long sleep waits in
        # ``due`` for the ticker, as a SCHEDULED job does.
        handed_off = state is JobState.SLEEPING and bool((sets or {}).get("lease_expires_at"))
        if state is JobState.SCHEDULED or (state is JobState.SLEEPING and not handed_off):
            keys["due_shard"] = shard
        elif state in (JobState.QUEUED, JobState.RUNNING) or handed_off:
            expires = (sets or {}).get("lease_expires_at") or (
                job.lease_expires_at if job is not None else None)
            if expires is None:
                raise ValueError(f"a {state} job needs lease_expires_at")
            start = max(now, int((sets or {}).get("run_at") or now)) if handed_off else now
            keys["sweep_shard"] = shard
            keys["sweep_at"] = sweep_bound(start, int(expires), self.settings)
            keys["lease_expires_at"] = expires
        if job is not None:  # creating: drop the Nones
            return {k: v for k, v in keys.items() if v is not None}
        return keys

    def _update(self, job_id: str, sets: Mapping[str, Any], removes: Sequence[str],
                increments: Mapping[str, int], condition: Sequence[str],
                values: Mapping[str, Any],
                companions: Sequence[Mapping[str, Any]] = (), known: Job | None = None) -> Job:
        update = update_request(self.table, {"job_id": {"S": job_id}}, sets=sets,
                                removes=removes, increments=increments, condition=condition,
                                names={"#state": "state"}, values=values)
        if companions:
            try:
                transact_write(self._ddb, [{"Update": update}, *companions])
            except Cancelled as cancelled:
                if not cancelled.failed(0):
                    raise
                item = cancelled.items[0]
                raise _Refused(job_from_item(item) if item else None) from None
            if known is None:
                return self.get(job_id)  # a transaction returns no attributes
            # The conditions held the row at ``known``'s (state, epoch): it is ``known`` with
            # this update applied, no read needed (see :func:`_applied`).
            return _applied(known, sets, removes, increments)
        try:
            response = self._ddb.update_item(ReturnValues="ALL_NEW", **update)
        except ClientError as exc:
            old = old_item(exc)
            if old is None:
                raise
            raise _Refused(job_from_item(from_av(old)) if old else None) from None
        return job_from_item(from_av(response["Attributes"]))

    def _explain(self, job_id: str, current: Job | None, change: Change, now: int,
                 expected_epoch: int, conflict: type[LeaseholdError]) -> Job:
        """A failed condition: our own earlier write (a retried request), or a real conflict."""
        if current is None:
            raise NotFound(f"no job {job_id}", job_id=job_id)
        last = current.history[-1] if current.history else None
        if (
            current.state is change.target and current.epoch == expected_epoch
            and last is not None and last.at == now and last.actor == change.actor
            and last.target == change.target.value
        ):
            # The write landed and only its response was lost: the change is committed, so
            # every observer hears of it now (it did not, when the first try "failed").
            return self._notify(current, JobState(last.source) if last.source else None)
        raise conflict(
            f"job {job_id} is {current.state} at epoch {current.epoch}",
            job_id=job_id, current=current,
        )

    def _query(self, index: str, condition: str, values: Mapping[str, Any],
               limit: int) -> Iterator[dict[str, Any]]:
        return query(self._ddb, limit=limit, TableName=self.table, IndexName=index,
                     KeyConditionExpression=condition,
                     ExpressionAttributeValues=to_av(values))


def _applied(job: Job, sets: Mapping[str, Any], removes: Sequence[str],
             increments: Mapping[str, int]) -> Job:
    """``job``'s row after an update that met it at the same (state, epoch).

    Attributes that writes outside transitions change at one (state, epoch) (a heartbeat's
    lease and progress, a cancel request, the sweep bound) are as the caller last saw them,
    unless this update sets them; the row has the truth (issue 21: a read per finish saved).
    """
    item = job_to_item(job)
    item.update(sets)
    for name, amount in increments.items():
        item[name] = item.get(name, 0) + amount
    for name in removes:
        item.pop(name, None)
    return job_from_item(item)


def sweep_bound(now: int, deadline: int, settings: Settings) -> int:
    """The latest safe ``sweep_at`` for a job queued at ``now`` with hand-off ``deadline``.

    A lease taken at ``now`` or later (by a worker whose clock runs at most the skew grace
    behind ours) expires no earlier than ``now + lease - grace``, and the hand-off itself is
    overdue at ``deadline``: the row cannot need the sweeper before the earlier of the two.
    """
    lease_ms = int(settings.lease_seconds * 1000)
    grace_ms = int(settings.skew_grace_seconds * 1000)
    return min(deadline, now + lease_ms - grace_ms)


def check_initial(state: JobState) -> None:
    if state not in INITIAL:
        raise ValueError(f"a new job cannot start {state}")
