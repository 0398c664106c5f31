"""The jobs table: every write conditional, every transition fenced by state and epoch.

One primitive, :meth:`DynamoJobStore.transition`, performs every state change. It also keeps
the sparse index keys in step with the state (only SCHEDULED jobs carry ``due_shard``; every
entry into QUEUED/RUNNING writes ``sweep_shard`` and ``sweep_at``, which the row keeps when it
leaves: the sweeper passes such an entry once, see :mod:`.sweep_frontier`) so that no caller
can forget them.

``sweep_at`` keeps one invariant: for every QUEUED or RUNNING job it is no later than the time
the row may need the sweeper (its hand-off deadline, or the expiry of any lease it has or may
still get). A lease and its heartbeats only push that time later, so they never touch the
index; the sweeper moves ``sweep_at`` forward itself (:meth:`DynamoJobStore.move_sweep`). A
QUEUED row's hand-off deadline is never later than its start window (``start_by``), whoever
hands it off, so a job that waits past its window is found and ended then.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from botocore.exceptions import ClientError

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import (
    Cancelled,
    batch_get,
    from_av,
    old_item,
    to_av,
    transact_write,
    update_request,
)
from leasehold.core import retention
from leasehold.core.flowcontrol import START_BY
from leasehold.core.ids import home_of, listed_at_home, shard_of
from leasehold.core.jobs import Job, Transition, job_from_item, job_to_item
from leasehold.core.states import INITIAL, JobState, check
from leasehold.errors import Conflict, LeaseholdError, NotFound
from leasehold.lifecycle.store_base import (
    ADMISSION_SHARD,
    CHANGES,
    COUNTED,
    DEADLINE,
    Companion,
    LeaseGate,
    Observer,
    Refusal,
    StoreBase,
)
from leasehold.lifecycle.store_index import IndexQueries, sweep_bound, tenant_shard
from leasehold.lifecycle.store_lease import Gated, LeaseWrites

__all__ = ["CHANGES", "Change", "Companion", "ConditionFailed", "DynamoJobStore", "Gated",
           "JobStore", "LeaseGate", "Observer", "Refusal", "StoreBase", "sweep_bound",
           "tenant_shard"]

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

    def create(self, job: Job, *, also: Sequence[Mapping[str, Any]] = (),
               swept: bool = True) -> tuple[Job, bool]: ...
    def put_request(self, job: Job, *, swept: bool = True) -> dict[str, Any]: ...
    def get(self, job_id: str) -> Job: ...
    def lease(self, job_id: str, epoch: int, *, owner: str, expires_at: int, now: int,
              actor: str, gate: Mapping[str, Any] | None = None,
              code_version: str = "") -> Job: ...
    def transition(self, job: Job, change: Change, *, now: int,
                   conflict: type[LeaseholdError] = Conflict) -> Job: ...
    def update_running(self, job: Job, *, owner: str, set: Mapping[str, Any],
                       conflict: type[LeaseholdError]) -> Job: ...
    def request_cancel(self, job: Job) -> Job: ...
    def set_hold(self, job: Job, *, set: Mapping[str, Any], remove: Sequence[str]) -> Job: ...
    def sweep_entries(self, shard: int, after: int, before: int, page: int = 500
                      ) -> Iterator[tuple[int, str]]: ...
    def move_sweep(self, job: Job, to: int) -> bool: ...
    def due(self, shard: int, until: int, limit: int) -> list[str]: ...
    def by_tenant(self, tenant: str, shard: int, *, limit: int,
                  cursor: Mapping[str, Any] | None = None, newest_first: bool = True,
                  bound: int | None = None
                  ) -> tuple[list[tuple[int, str]], Mapping[str, Any] | None]: ...
    def at_home(self, tenant: str, shard: int, *, limit: int,
                cursor: Mapping[str, Any] | None = None, newest_first: bool = True,
                bound: int | None = None) -> tuple[list[Job], Mapping[str, Any] | None]: ...
    def batch_get(self, job_ids: Sequence[str]) -> list[Job]: ...


#: A random token each creation writes on its row, so that a retried put whose first try
#: landed recognises its own row instead of taking it for an idempotent replay.
WRITE_TOKEN = "write_token"


class _Refused(Exception):
    """A conditional update's condition failed; ``current`` is the row as DynamoDB saw it
    (returned with the failure, so nobody needs to read it again), or None if there is none."""

    def __init__(self, current: Job | None) -> None:
        super().__init__()
        self.current = current



class ConditionFailed(LeaseholdError):
    """A conditional write found the job changed."""



class DynamoJobStore(LeaseWrites, IndexQueries):
    """Every part of the store on one object: creation and reads (here), the one transition
    primitive (here), the lease (:mod:`.store_lease`), the indexes (:mod:`.store_index`)."""


    def create(self, job: Job, *, also: Sequence[Mapping[str, Any]] = (),
               swept: bool = True) -> tuple[Job, bool]:
        """Put a new job; if the id exists, return the stored one and ``False``.

        ``also``: items written in the same transaction (the tenant's slot an admission
        takes). If one of their conditions fails, nothing is written and
        :class:`~leasehold.aws.dynamo.Cancelled` is raised for the caller to read.
        ``swept``: False for a QUEUED row whose message was sent before it (send-first,
        :mod:`.handoff`): the row carries no ``sweep`` entry; its message recovers it.
        """
        put = self.put_request(job, swept=swept)
        token = put["Item"][WRITE_TOKEN]["S"]
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
        return self._notify(replace(job, extra={**job.extra, CHANGES: 0}), None), True

    def put_request(self, job: Job, *, swept: bool = True) -> dict[str, Any]:
        """The conditional ``Put`` that creates ``job``'s row with its index keys (one
        :meth:`create` makes, or a caller's own transaction carries: ``enqueue_item``);
        ``swept``: see :meth:`create`."""
        check_initial(job.state)
        keys = self._index_keys(job.job_id, job.state, job, now=job.created_at)
        if not swept and job.state is JobState.QUEUED:
            keys = {k: v for k, v in keys.items() if k not in ("sweep_shard", "sweep_at")}
        item = job_to_item(job) | keys | {
            "pk": home_of(job.job_id), WRITE_TOKEN: secrets.token_hex(8), CHANGES: 0}
        if not listed_at_home(job.job_id, job.tenant, job.created_at,
                              self.settings.tenant_shards):
            # Not listed by a Query of its tenant's homes in creation order (a derived id):
            # listed from the sparse index instead (one more write unit, keyed jobs only).
            item["tenant_shard"] = tenant_shard(
                job.tenant, shard_of(job.job_id, self.settings.tenant_shards))
        return {"TableName": self.table, "Item": to_av(item),
                "ConditionExpression": "attribute_not_exists(job_id)",
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}

    def _existing(self, job_id: str, item: Mapping[str, Any] | None, token: str
                  ) -> tuple[Job, bool]:
        stored = job_from_item(item) if item else self.get(job_id)
        if stored.extra.get(WRITE_TOKEN) == token:
            # Our own put: its response was lost and the retry met it. The job is new.
            return self._notify(stored, None), True
        return stored, False

    def batch_get(self, job_ids: Sequence[str]) -> list[Job]:
        return [job_from_item(item)
                for item in batch_get(self._ddb, self.table, "job_id", job_ids, job_key)]

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
        start_by = None if START_BY in change.remove else \
            change.set.get(START_BY, job.extra.get(START_BY))
        deadline = None if DEADLINE in change.remove else \
            change.set.get(DEADLINE, job.extra.get(DEADLINE))
        index = self._index_keys(job.job_id, change.target, None, sets, now=now,
                                 start_by=start_by, deadline=deadline)
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
        # A job that ends holding no slot: it must still hold none. A cap set since it was
        # read may have counted it in (``counted`` false -> true, written at no (state,
        # epoch) change); then it ends as a counted job, giving its slot back (see below).
        uncounted_end = job.state.live and change.target.terminal and \
            not job.extra.get(COUNTED)
        if uncounted_end:
            condition.append("(attribute_not_exists(counted) OR counted = :uncounted)")
            values[":uncounted"] = False
        increments = {**change.increment, CHANGES: 1}
        if change.bump_epoch:
            increments["epoch"] = 1
        expected_epoch = job.epoch + (1 if change.bump_epoch else 0)
        companions = [*change.also, *(item for companion in self.companions
                                      for item in companion(job, change.target))]
        try:
            new = self._update(job.job_id, sets, removes, increments, condition, values,
                               companions, known=job)
        except _Refused as refused:
            current = refused.current
            if uncounted_end and current is not None and current.extra.get(COUNTED) and \
                    (current.state, current.epoch) == (job.state, job.epoch):
                return self.transition(replace(job, extra={
                    **job.extra, COUNTED: True, ADMISSION_SHARD: current.extra.get(
                        ADMISSION_SHARD)}), change, now=now, conflict=conflict)
            return self._explain(job.job_id, current, change, now, expected_epoch,
                                 conflict)
        return self._notify(new, job.state)

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

    def set_hold(self, job: Job, *, set: Mapping[str, Any], remove: Sequence[str]) -> Job:
        """Put on or lift a hold (``core/holds.py``) without a transition: the job stays in
        its state. Fenced by (state, epoch) like a transition, so it lands on the row as the
        caller read it; :class:`ConditionFailed` when the row moved on (read it again)."""
        try:
            return self._update(
                job.job_id, dict(set), list(remove), {},  # no state change: no event
                ["#state = :source", "epoch = :epoch"],
                {":source": job.state.value, ":epoch": job.epoch},
            )
        except _Refused:
            raise ConditionFailed(job_id=job.job_id) from None

    # -- helpers ------------------------------------------------------------------------

    def _update(self, job_id: str, sets: Mapping[str, Any], removes: Sequence[str],
                increments: Mapping[str, int], condition: Sequence[str],
                values: Mapping[str, Any],
                companions: Sequence[Mapping[str, Any]] = (), known: Job | None = None) -> Job:
        update = update_request(self.table, job_key(job_id), sets=sets,
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
        new, old = self._update_or_refusal(update)
        if new is None:
            raise _Refused(job_from_item(old) if old else None)
        return job_from_item(new)

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


def check_initial(state: JobState) -> None:
    if state not in INITIAL:
        raise ValueError(f"a new job cannot start {state}")
