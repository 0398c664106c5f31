"""The lease: QUEUED (or a short sleep's SLEEPING) -> RUNNING for the holder of a message,
through the job's flow-control gate when it has one (see :mod:`leasehold.lifecycle.store`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import Cancelled, to_av, transact_write
from leasehold.core.flowcontrol import GATE, START_BY
from leasehold.core.holds import HOLDS, held
from leasehold.core.jobs import CODE_VERSION, Job, Transition, job_from_item
from leasehold.core.states import JobState
from leasehold.errors import Conflict, StaleMessage
from leasehold.lifecycle.store_base import CHANGES, Refusal, StoreBase

#: Leases a gate may refuse in a row before the gate hands the job off again (or, if it
#: cannot, the message is left to come back).
GATE_TRIES = 5


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



class LeaseWrites(StoreBase):
    """The lease, plain or through a gate."""

    def lease(self, job_id: str, epoch: int, *, owner: str, expires_at: int, now: int,
              actor: str, gate: Mapping[str, Any] | None = None,
              code_version: str = "") -> Job:
        """QUEUED -> RUNNING for the holder of message ``(job_id, epoch)``.

        The worker has not read the job (that would cost a request per job), so the history
        entry is appended rather than rewritten; the next transition trims it.

        ``gate``: the job's flow control as its message carries it. With a
        :attr:`lease_gate` installed, a gated job is leased only together with what the gate
        takes (a concurrency slot, a throttle's turn), in one transaction; a job whose row
        has a gate its message did not carry is leased that way too (the plain lease's
        condition refuses it). Refused by the gate, the job is parked or delayed by the gate
        and :class:`Gated` is raised.

        ``code_version``: the version of the code this attempt runs, kept in its history
        entry, and on the row as ``code_version`` by the job's first attempt.
        """
        entry = Transition(now, JobState.QUEUED.value, JobState.RUNNING.value, actor, "lease",
                           code_version)
        for _ in range(GATE_TRIES):
            try:
                return self._lease(job_id, epoch, owner, expires_at, now, entry, gate)
            except _NeedsGate as needs:
                gate = needs.gate
            except _GateRefused as refused:
                assert self.lease_gate is not None and gate is not None
                if self.lease_gate.refused(gate, job_id, epoch, refused.cancelled, now):
                    raise Gated(f"job {job_id} waits (flow control)", job_id=job_id) from None
        if self.lease_gate is not None and gate is not None and \
                self.lease_gate.contended(gate, job_id, epoch, now):
            raise Gated(f"job {job_id} waits (its gate is contended)", job_id=job_id)
        raise Conflict(f"job {job_id}: its gate kept changing; the message comes back",
                       job_id=job_id)

    def _lease(self, job_id: str, epoch: int, owner: str, expires_at: int, now: int,
               entry: Transition, gate: Mapping[str, Any] | None) -> Job:
        update: dict[str, Any] = dict(
            TableName=self.table, Key=job_key(job_id),
            UpdateExpression=(
                "SET #state = :running, lease_owner = :owner, lease_expires_at = :exp, "
                "started_at = :now, first_started_at = if_not_exists(first_started_at, :now), "
                "attempt = if_not_exists(attempt, :zero) + :one, "
                f"{CHANGES} = if_not_exists({CHANGES}, :zero) + :one, "
                "history = list_append(if_not_exists(history, :empty), :entry)"
                + (f", {CODE_VERSION} = if_not_exists({CODE_VERSION}, :version)"
                   if entry.version else "")
            ),
            # A start window (leasehold.flow's expiry) refuses the lease once it has passed,
            # and a started job never expires: the lease removes it.
            # A durable job's short sleep is leased straight from SLEEPING by its delayed
            # message (see lifecycle/suspending.py).
            # A held job (paused, or a reset under way: core/holds.py) is never started,
            # whichever message or path hands it off.
            ConditionExpression=("#state IN (:queued, :sleeping) AND epoch = :epoch AND "
                                 f"(attribute_not_exists({START_BY}) OR {START_BY} > :now)"
                                 + "".join(f" AND attribute_not_exists({hold})"
                                           for hold in HOLDS)),
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=to_av({
                ":running": JobState.RUNNING.value, ":queued": JobState.QUEUED.value,
                ":sleeping": JobState.SLEEPING.value,
                ":owner": owner, ":exp": expires_at, ":now": now, ":zero": 0, ":one": 1,
                ":empty": [], ":entry": [entry.to_item()], ":epoch": epoch,
                **({":version": entry.version} if entry.version else {}),
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
        new, old = self._update_or_refusal(update)
        if new is None:
            return self._not_leased(old, job_id, epoch, owner, now)
        return self._notify(job_from_item(new), JobState.QUEUED)

    def _not_leased(self, old: Mapping[str, Any], job_id: str, epoch: int, owner: str,
                    now: int) -> Job:
        """A lease's condition failed: our own lease (a retried request met it applied), a
        gated row leased without its gate, or a stale message (or one whose start window
        passed: the caller's refused-lease hooks end that job; or a held one: its message is
        done with, and lifting the hold hands it off again)."""
        current = job_from_item(old) if old else None
        if current is not None and current.state is JobState.RUNNING and \
                current.epoch == epoch and current.lease_owner == owner:
            # Our own lease: the retried request met it applied. Committed, so every
            # observer hears of it now, as the lost first response never told them.
            return self._notify(current, JobState.QUEUED)
        start_by = None if current is None else current.extra.get(START_BY)
        if current is not None and current.state in (JobState.QUEUED, JobState.SLEEPING) and \
                current.epoch == epoch and current.extra.get(GATE) and \
                not held(current.extra) and (start_by is None or int(start_by) > now):
            raise _NeedsGate(current.extra[GATE])
        raise StaleMessage(f"message for {job_id} at epoch {epoch} is stale",
                           job_id=job_id, current=current) from None
