"""Upgrades of stored rows: the tenant index's shards (below), and the live jobs a new cap
counts in (:func:`count_in_live_jobs`).

Upgrading a table written before the tenant index was sharded: rows without
``tenant_shard`` are not in the ``by_tenant_shard`` index, so listings miss them until this
gives them one (the same shard a new row with that id would get). A row its tenant's home
lists (``core.ids.listed_at_home``: a plain job's) needs none and gets none. Idempotent and
resumable:
each update is conditional on the key still missing, so running it twice, or alongside live
traffic, writes every row at most once."""

from __future__ import annotations

import random
from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import Cancelled, condition_failed, transact_write, update_request
from leasehold.core.ids import listed_at_home, shard_of
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.errors import NotFound, Overloaded
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import tenant_shard
from leasehold.lifecycle.submission import ADMISSION_SHARD, COUNTED
from leasehold.tenancy.counters import add, slot_item
from leasehold.tenancy.limits import SLOT_FREE, Limits
from leasehold.tenancy.plans import limits_for


def backfill_tenant_shards(app: Leasehold, *, page: int = 500) -> int:
    """Give every row without ``tenant_shard`` its shard; returns how many were written."""
    ddb, table = app.clients.dynamodb, app.settings.jobs_table
    written = 0
    kwargs: dict[str, Any] = {
        "TableName": table, "Limit": page, "ProjectionExpression": "job_id, tenant, created_at",
        "FilterExpression": "attribute_not_exists(tenant_shard)"}
    while True:
        response = ddb.scan(**kwargs)
        for item in response.get("Items", []):
            job_id, tenant = item["job_id"]["S"], item["tenant"]["S"]
            if listed_at_home(job_id, tenant, int(item["created_at"]["N"]),
                              app.settings.tenant_shards):
                continue
            key = tenant_shard(tenant, shard_of(job_id, app.settings.tenant_shards))
            try:
                ddb.update_item(
                    TableName=table, Key=job_key(job_id),
                    UpdateExpression="SET tenant_shard = :k",
                    ConditionExpression="attribute_exists(job_id) AND "
                                        "attribute_not_exists(tenant_shard)",
                    ExpressionAttributeValues={":k": {"S": key}})
                written += 1
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
        if "LastEvaluatedKey" not in response:
            return written
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def count_in_live_jobs(app: Leasehold, limits: Limits, *, page: int = 500) -> int:
    """After a cap is set (``LEASEHOLD_TENANT_MAX_LIVE`` from 0 to a number; a tenant's plan's
    cap, :mod:`.plans`, counts for its jobs), count every live
    job admitted without a slot (``counted`` false: admission, ``enqueue_item`` or a durable
    child while there was no cap; a library job has no ``counted`` and holds no slot under a
    cap either) into its tenant's admission items, so the cap covers them; returns how many
    were counted in.

    Each job is one transaction: its row gets ``counted`` (conditioned on its state and
    epoch as read, and on ``counted`` still false) and one of its tenant's items ``ADD live 1``
    (under no cap condition: a tenant already over its new cap is counted over it, and
    admission refuses until enough finish). So the tenant's counters equal its live counted
    rows before, during and after; a row that changed since the scan read it is read again,
    and one that ended is skipped. Idempotent and resumable: a process killed part-way leaves
    the rows it did counted and the others not, and a second run counts the others. A
    worker that read the row before it was counted ends it as a counted job (the store's
    uncounted ending is conditioned on ``counted`` still absent or false), so its slot goes back.
    """
    if not limits.capped:
        raise ValueError("count_in_live_jobs: there is no cap to count jobs in for")
    ddb, table = app.clients.dynamodb, app.settings.jobs_table
    live = [state.value for state in JobState if state.live]
    counted = 0
    kwargs: dict[str, Any] = {
        "TableName": table, "Limit": page, "ProjectionExpression": "job_id",
        "FilterExpression": "#counted = :uncounted AND #state IN ("
                            + ", ".join(f":s{i}" for i in range(len(live))) + ")",
        "ExpressionAttributeNames": {"#counted": COUNTED, "#state": "state"},
        "ExpressionAttributeValues": {":uncounted": {"BOOL": False},
                                      **{f":s{i}": {"S": s} for i, s in enumerate(live)}}}
    while True:
        response = ddb.scan(**kwargs)
        for item in response.get("Items", []):
            counted += _count_in(app, item["job_id"]["S"], limits)
        if "LastEvaluatedKey" not in response:
            return counted
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def _count_in(app: Leasehold, job_id: str, base: Limits, tries: int = 5) -> int:
    for _ in range(tries):
        try:
            job = app.store.get(job_id)
        except NotFound:
            return 0
        if not job.state.live or job.extra.get(COUNTED) is not False:
            return 0  # ended, counted already, or never admitted (a library job)
        limits = limits_for(app, job.tenant, base)  # its plan's cap, if it has one
        if not limits.capped:
            return 0  # its plan lifts the cap: it holds no slot
        shards = limits.shard_count()
        # An item with room under its share first, so the tenant's items fill as admission
        # fills them; over the cap on every item, the job's own item takes it regardless.
        order = [(shard, limits.per_shard(shards, shard).max_live)
                 for shard in random.sample(range(shards), shards)]
        order.append((shard_of(job_id, shards), None))
        for shard, cap in order:
            try:
                transact_write(app.clients.dynamodb, [
                    {"Update": _mark(app, job, shard)}, _slot(app, job.tenant, shard, cap)])
                return 1
            except Cancelled as cancelled:
                if cancelled.failed(0):
                    break  # the row moved on (or a try of ours landed): read it again
    raise Overloaded(f"job {job_id} kept changing while it was being counted in; run again",
                     retry_after=1)


def _mark(app: Leasehold, job: Job, shard: int) -> dict[str, Any]:
    return update_request(
        app.settings.jobs_table, job_key(job.job_id),
        sets={COUNTED: True, **({ADMISSION_SHARD: shard} if shard else {})},
        removes=[] if shard else [ADMISSION_SHARD], increments={},
        condition=["#state = :source", "epoch = :epoch", f"{COUNTED} = :uncounted"],
        names={"#state": "state"},
        values={":source": job.state.value, ":epoch": job.epoch, ":uncounted": False})


def _slot(app: Leasehold, tenant: str, shard: int, cap: int | None) -> dict[str, Any]:
    entry = add(app.settings, slot_item(tenant, shard), {"live": 1})
    if cap is not None:
        entry["Update"]["ConditionExpression"] = SLOT_FREE.replace("#live", "#a0")
        entry["Update"]["ExpressionAttributeValues"][":cap"] = {"N": str(cap)}
    return entry
