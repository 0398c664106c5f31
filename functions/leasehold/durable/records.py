"""A durable job's records: its steps, sleeps and callbacks, one item each.

They live in the coordination table (``pk = "durable#<job_id>"``, ``sk = "<kind>#<name>"``),
not in the job row and not as rows of the jobs table:

- one item per record keeps the job row small whatever the number of steps (a row is read
  and rewritten on every transition), and one ``Query`` reads a job's records back;
- the jobs table holds jobs only: the tenant backfill and the local state's loader read
  every item there as a job;
- the coordination table already has the (partition, sort) shape this needs. A table of
  its own would be cleaner to grant and to watch; it needs a table in the settings, the
  stack, the local state and every test fixture, so it is left for later.

Every write a handler's attempt makes is **fenced**: one ``TransactWriteItems`` with the
record's put and a ``ConditionCheck`` on the job row (RUNNING, the attempt's epoch, its lease
owner). An attempt that lost its lease stores nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import (
    Cancelled,
    delete_partition,
    from_av,
    old_item,
    query,
    to_av,
    transact_write,
    update_request,
)
from leasehold.core.effects import refused_entry
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.durable import runs
from leasehold.errors import LeaseLost
from leasehold.lifecycle.app import Leasehold

PREFIX = "durable#"
#: A step's stored result, as compact JSON. Like a job's result (``MAX_RESULT_BYTES``): the
#: record must fit a 400 KB DynamoDB item with room to spare, a resume reads every record
#: of its job (64 KB is 16 read units, strongly consistent), and a step that returns more
#: should store it elsewhere (S3) and return its key.
MAX_STEP_BYTES = 64 * 1024
#: Records (steps, sleeps, callbacks) per job: a resume reads them all, at most ~32 MB at
#: the size limit; a job that needs more should be split into children.
MAX_RECORDS = 500


def partition(job_id: str) -> str:
    return PREFIX + job_id


def purge(app: Leasehold, job_ids: Sequence[str]) -> None:
    """Delete every record of these jobs, whose rows are gone (``app.removals``). Never
    called for a row that still exists: a finished job re-run by hand replays them all."""
    for job_id in job_ids:
        delete_partition(app.clients.dynamodb, app.settings.coordination_table,
                         partition(job_id))


def load(app: Leasehold, job_id: str) -> dict[str, dict[str, Any]]:
    """Every record of a job, by sort key (one strongly consistent Query, paged)."""
    return {item["sk"]: item for item in query(
        app.clients.dynamodb, TableName=app.settings.coordination_table,
        KeyConditionExpression="pk = :pk", ConsistentRead=True,
        ExpressionAttributeValues=to_av({":pk": partition(job_id)}))}


def has_any(app: Leasehold, job_id: str) -> bool:
    """Whether the job has any record (one key read at most)."""
    response = app.clients.dynamodb.query(
        TableName=app.settings.coordination_table, KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": partition(job_id)}}, Limit=1,
        ProjectionExpression="sk", ConsistentRead=True)
    return bool(response.get("Items"))


def get(app: Leasehold, job_id: str, sk: str) -> dict[str, Any] | None:
    response = app.clients.dynamodb.get_item(
        TableName=app.settings.coordination_table, ConsistentRead=True,
        Key={"pk": {"S": partition(job_id)}, "sk": {"S": sk}})
    return from_av(response["Item"]) if "Item" in response else None


def lease_check(app: Leasehold, job: Job, owner: str) -> dict[str, Any]:
    """The ``ConditionCheck`` that fences a write to the attempt holding the lease."""
    return {"ConditionCheck": {
        "TableName": app.settings.jobs_table, "Key": job_key(job.job_id),
        "ConditionExpression": "#state = :running AND epoch = :epoch AND lease_owner = :owner",
        "ExpressionAttributeNames": {"#state": "state"},
        "ExpressionAttributeValues": to_av({":running": JobState.RUNNING.value,
                                            ":epoch": job.epoch, ":owner": owner})}}


def put_fenced(app: Leasehold, job: Job, owner: str, sk: str, attributes: Mapping[str, Any],
               effects: Sequence[Mapping[str, Any]] = (), where: str = "") -> dict[str, Any]:
    """Store a record once, under the lease, with ``effects`` (the ``ctx.transact`` entries
    of a step) in the same transaction; the record as stored.

    If it exists already (an earlier attempt stored it, or our own first try whose response
    was lost), the stored one is returned and nothing changes: a record is written at most
    once per job, and its effects with it, so they too apply once. Raises
    :class:`LeaseLost` if this attempt no longer holds the lease, and
    :class:`~leasehold.core.effects.EffectRefused` if an effect's own condition failed
    (nothing was written).
    """
    item = {"pk": partition(job.job_id), "sk": sk, **attributes}
    put = {"Put": {"TableName": app.settings.coordination_table, "Item": to_av(item),
                   "ConditionExpression": "attribute_not_exists(sk)",
                   "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}
    try:
        refused = _fenced(app, job, owner, put, effects)
    except (ClientError, BotoCoreError):
        # The answer was lost (botocore's retries ran out): the transaction may have landed.
        # The record is its proof, and with it the effects; else nothing was written.
        stored = get(app, job.job_id, sk)
        if stored is None:
            raise
        return stored
    if refused is None:
        return item
    if not refused.failed(0):
        raise refused_entry(effects, refused.codes, refused.messages, first=2,
                            where=where or sk) or refused
    return refused.items[0] or get(app, job.job_id, sk) or item


def update_fenced(app: Leasehold, job: Job, owner: str, sk: str, sets: Mapping[str, Any],
                  condition: str) -> dict[str, Any] | None:
    """Update a record under the lease if ``condition`` holds; None when it did not (the
    caller reads the record again). Raises :class:`LeaseLost` off the lease."""
    update = update_if(app, job.job_id, sk, sets, f"attribute_exists(sk) AND {condition}", {})
    if _fenced(app, job, owner, {"Update": update}) is not None:
        return None
    return get(app, job.job_id, sk)


def rearm_fenced(app: Leasehold, job: Job, owner: str, sk: str, run: int, timeout_at: int,
                 now: int) -> dict[str, Any]:
    """Re-arm a callback an earlier run closed or left open (see :mod:`.runs`): no outcome,
    a fresh timeout, this run's; under the lease. The record as it is after: re-armed, or
    as a completion that won meanwhile left it."""
    update = update_request(
        app.settings.coordination_table,
        {"pk": {"S": partition(job.job_id)}, "sk": {"S": sk}},
        sets={"timeout_at": timeout_at, runs.RECORD_RUN: run, "at": now},
        removes=("outcome", "settled_at", "error", "value"), increments={},
        condition=["attribute_exists(sk)", runs.REARMABLE], names={},
        values=runs.values(run))
    try:
        _fenced(app, job, owner, {"Update": update})  # refused: a completion won, or ours
    except (ClientError, BotoCoreError):
        # The answer was lost: the record says whether it landed (this run's) or not.
        record = get(app, job.job_id, sk) or {}
        if int(record.get(runs.RECORD_RUN) or 0) != run:
            raise
        return record
    return get(app, job.job_id, sk) or {}


def _fenced(app: Leasehold, job: Job, owner: str, entry: Mapping[str, Any],
            also: Sequence[Mapping[str, Any]] = ()) -> Cancelled | None:
    """Write ``entry`` in one transaction with :func:`lease_check` (and ``also`` after it);
    its refusal (None: it was written). Raises :class:`LeaseLost` if this attempt no longer
    holds the lease."""
    try:
        transact_write(app.clients.dynamodb, [entry, lease_check(app, job, owner), *also])
    except Cancelled as cancelled:
        if cancelled.failed(1):
            raise LeaseLost(f"job {job.job_id} is no longer this attempt's",
                            job_id=job.job_id) from None
        return cancelled
    return None


def update_if(app: Leasehold, job_id: str, sk: str, sets: Mapping[str, Any], condition: str,
              values: Mapping[str, Any]) -> dict[str, Any]:
    """An ``Update`` of a record for a transaction, or alone (callback completion)."""
    names = {f"#a{i}": name for i, name in enumerate(sets)}
    all_values = {**{f":a{i}": value for i, value in enumerate(sets.values())}, **values}
    return {"TableName": app.settings.coordination_table,
            "Key": {"pk": {"S": partition(job_id)}, "sk": {"S": sk}},
            "UpdateExpression": "SET " + ", ".join(f"#a{i} = :a{i}" for i in range(len(sets))),
            "ConditionExpression": condition, "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": to_av(all_values),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}


def update_alone(app: Leasehold, update: Mapping[str, Any]) -> bool:
    """Apply one :func:`update_if` request; False when its condition failed."""
    try:
        app.clients.dynamodb.update_item(**update)
    except ClientError as exc:
        if old_item(exc) is None:
            raise
        return False
    return True
