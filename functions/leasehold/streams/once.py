"""``ctx.once(name, fn)``: an effect that cannot join the finish transaction, run to
completion at most once per (job, name) across attempts, as Powertools idempotency does.

The record is an item of the coordination table (``once#<job_id>``, ``name``) holding the
result as JSON and the fencing token of the attempt that wrote it, put only if absent: the
first attempt to finish ``fn`` wins, a later one (a retry, a redelivery, a re-drive) reads the
recorded result instead of calling ``fn`` again. An attempt killed after ``fn`` and before the
put runs ``fn`` again: that window is the external system's to close, with the fencing token
(refuse an older one) or its own idempotency key (``ctx.idempotency_key`` + ``name``).

The record lives exactly as long as the job's row: it carries no TTL (one used to expire it
7 days after ``fn`` ran, so a retry after a long backoff, a wake-up after a long sleep or a
re-run by hand of a finished job still retained ran ``fn`` again), and the change-stream
relay deletes the job's ``once#`` partition when the row is removed (``app.removals``: its
retention TTL, a delete, a bulk delete).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.dynamo import condition_failed, delete_partition
from leasehold.core.context import JobContext
from leasehold.lifecycle.app import Leasehold

PREFIX = "once#"


def _key(ctx: JobContext, name: str) -> dict[str, Any]:
    return {"pk": {"S": PREFIX + ctx.job_id}, "sk": {"S": name}}


def once(app: Leasehold, ctx: JobContext, name: str, fn: Callable[[], Any]) -> Any:
    ddb = app.clients.dynamodb
    table = app.settings.coordination_table
    found = ddb.get_item(TableName=table, Key=_key(ctx, name), ConsistentRead=True).get("Item")
    if found:
        return json.loads(found["result"]["S"])
    result = fn()
    item = {**_key(ctx, name), "result": {"S": json.dumps(result)},
            "fencing_token": {"N": str(ctx.fencing_token)}}
    try:
        ddb.put_item(TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)")
    except ClientError as exc:
        if not condition_failed(exc):
            raise
        # Another attempt recorded first (or our own put landed and its answer was lost).
        stored = ddb.get_item(TableName=table, Key=_key(ctx, name), ConsistentRead=True)
        return json.loads(stored["Item"]["result"]["S"])
    return result


def purge(app: Leasehold, job_ids: Sequence[str]) -> None:
    """Delete the records of these jobs, whose rows are gone (``app.removals``)."""
    for job_id in job_ids:
        delete_partition(app.clients.dynamodb, app.settings.coordination_table,
                         PREFIX + job_id)


def install(app: Leasehold) -> None:
    """Give every attempt's context ``ctx.once``; its records go with the job's row."""
    def equip(app: Leasehold, ctx: JobContext) -> None:
        ctx._once = partial(once, app, ctx)

    app.contexts.append(equip)
    app.removals.append(purge)
