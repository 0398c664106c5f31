"""A tenant's live-job slots and outcome counts, kept exact by writing them in the same
transaction as the job's own change.

Only jobs the API admitted hold a slot (``COUNTED`` on the row): admission takes it in the
transaction that creates the row, or that puts a finished job back live (a manual retry or a
redrive, :mod:`leasehold.tenancy.admission`, under the same cap and rate), and the store gives
it back in the transaction that makes the job terminal, through the companion below. A retry of a
transaction whose first try landed fails the job row's condition and so never counts twice; a
process that dies between two writes leaves nothing half done, because there is no second
write. Jobs made by schedules, triggers, workflows and library calls hold no slot; their
outcomes are counted for ``/stats`` by an observer (:class:`OutcomeCounts`), spread over
``OUTCOME_SHARDS`` items per tenant (no hot key) and written once per batch of jobs (one write
per finished job outside a batch), best-effort: counts a crash or a failed write skips are not
counted (a figure for people, never for admission).

A tenant whose rate needs it has several admission items (``leasehold.tenancy.admission``):
shard 0 is the tenant's own item, shard k its ``{tenant}#admit#{k}``. A job's slot is given
back on the shard its row names (``admission_shard``; rows without one took it from shard 0),
and the figures for people sum every shard.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from typing import Any

from leasehold.aws.dynamo import batch_get, to_av
from leasehold.core.ids import shard_of
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.deferral import Deferred
from leasehold.lifecycle.store import Companion
from leasehold.lifecycle.submission import ADMISSION_SHARD, COUNTED, SLOT_AT
from leasehold.settings import Settings

log = logging.getLogger(__name__)


def add(settings: Settings, tenant: str, deltas: dict[str, int]) -> dict[str, Any]:
    """The ``TransactWriteItems`` entry adding ``deltas`` to a tenant's counters."""
    names = {f"#a{i}": name for i, name in enumerate(deltas)}
    values = {f":v{i}": amount for i, amount in enumerate(deltas.values())}
    return {"Update": {
        "TableName": settings.tenants_table, "Key": {"tenant": {"S": tenant}},
        "UpdateExpression": "ADD " + ", ".join(f"#a{i} :v{i}" for i in range(len(deltas))),
        "ExpressionAttributeNames": names, "ExpressionAttributeValues": to_av(values)}}


def slot_item(tenant: str, shard: int) -> str:
    """The key of a tenant's admission shard (its bucket share and live-slot count)."""
    return tenant if shard == 0 else f"{tenant}#admit#{shard}"


def slot_writes(settings: Settings) -> Companion:
    """The store companion that gives a slot back when a counted job ends, counting the
    outcome for ``/stats``, for a slot taken in a transaction with its row (a manual
    retry, a count-in, a durable child, ``enqueue_item``); a submission's slot, taken
    before its row, goes back after the end instead (:mod:`.slots`). It never takes one: a
    finished job goes back live only through admission, whose conditional write takes the
    slot under the cap and takes the outcome back (``admission.retry_admitted``)."""

    def writes(job: Job, target: JobState) -> list[dict[str, Any]]:
        if not job.extra.get(COUNTED) or job.extra.get(SLOT_AT) is not None:
            return []  # uncounted, or its slot goes back after the end (.slots)
        item = slot_item(job.tenant, int(job.extra.get(ADMISSION_SHARD) or 0))
        if job.state.live and target.terminal:
            return [add(settings, item, {"live": -1, f"count_{target.value}": 1})]
        return []

    return writes


#: Admission shards ``counts`` reads at least (a batch read takes 100 keys; absent ones cost
#: nothing).
MIN_ADMISSION_SHARDS_READ = 8

#: Items per tenant the outcome counts of other jobs are spread over.
OUTCOME_SHARDS = 8


def _outcome_item(tenant: str, shard: int) -> str:
    return f"{tenant}#outcomes#{shard}"


def outcome_item(tenant: str, job_id: str) -> str:
    """The outcome item a job's own outcome write goes to (one of :data:`OUTCOME_SHARDS`,
    by its id): where a re-run takes back, in its transaction, the outcome of a job the
    observer counted (the observer's batches spread theirs by a batch's first job; only the
    sum over the items means anything)."""
    return _outcome_item(tenant, shard_of(job_id, OUTCOME_SHARDS))


class OutcomeCounts:
    """The store observer counting the outcomes of jobs the API did not admit.

    Within a batch (``Leasehold.batch``: a worker's batch of records, a ticker or sweeper
    pass) the counts wait and go out at its end, one ``ADD`` per tenant, so a batch of ten
    jobs of one tenant costs one write instead of ten. Best-effort, as
    documented above: a process that dies before its batch ends does not count it.
    """

    def __init__(self, app: Leasehold) -> None:
        self.app = app
        self._kept: Deferred[tuple[str, str, dict[str, int]]] = Deferred(self._write)
        self.batch = self._kept.batch

    def __call__(self, job: Job, source: JobState | None) -> None:
        if job.extra.get(COUNTED) or source is None:
            return  # API jobs are counted exactly, with their slot
        if source.live and job.state.terminal:
            deltas = {f"count_{job.state.value}": 1}
        elif source.terminal and job.state.live:  # a manual retry
            deltas = {f"count_{source.value}": -1}
        else:
            return
        if not self._kept.add((job.tenant, job.job_id, deltas)):
            self._write([(job.tenant, job.job_id, deltas)])

    def _write(self, counts: list[tuple[str, str, dict[str, int]]]) -> None:
        # One write per tenant: its counts of the whole batch go to one of its outcome items,
        # picked by the batch's first job (spread over the items as batches come and go).
        by_tenant: dict[str, Counter[str]] = defaultdict(Counter)
        first: dict[str, str] = {}
        for tenant, job_id, deltas in counts:
            by_tenant[tenant].update(deltas)
            first.setdefault(tenant, job_id)
        for tenant, total in by_tenant.items():
            deltas = {name: amount for name, amount in total.items() if amount}
            if not deltas:
                continue
            item = _outcome_item(tenant, shard_of(first[tenant], OUTCOME_SHARDS))
            try:
                self.app.clients.dynamodb.update_item(
                    **add(self.app.settings, item, deltas)["Update"])
            except Exception:
                log.exception("could not count %s on %s (a /stats figure only)", deltas, item)


def count_outcomes(app: Leasehold) -> OutcomeCounts:
    """Install the outcome counts on ``app``: a store observer, batched within its batches."""
    counter = OutcomeCounts(app)
    app.store.observers.append(counter)
    app.batches.append(counter.batch)
    return counter


def counts(app: Leasehold, tenant: str, admission_shards: int = 1
           ) -> tuple[dict[str, int], int]:
    """Finished jobs by outcome (every job), and live API-admitted jobs, of one tenant.

    Counters, never a scan: one batched read of the tenant's admission shards (the first
    ``admission_shards``, at least :data:`MIN_ADMISSION_SHARDS_READ`, so lowering the setting
    does not hide what the higher shards hold) and its outcome shards.
    Live jobs are not split by state (that would cost a write on every transition; queue
    depths show QUEUED and RUNNING per pool).
    """
    slots = [slot_item(tenant, shard)
             for shard in range(max(admission_shards, MIN_ADMISSION_SHARDS_READ))]
    keys = [*slots, *(_outcome_item(tenant, shard) for shard in range(OUTCOME_SHARDS))]
    items = batch_get(app.clients.dynamodb, app.settings.tenants_table, "tenant", keys)
    by_state = {state.value: max(0, sum(int(item.get(f"count_{state.value}", 0))
                                         for item in items))
                for state in JobState if state.terminal}
    live = sum(int(item.get("live", 0)) for item in items if item["tenant"] in slots)
    return by_state, max(0, live)
