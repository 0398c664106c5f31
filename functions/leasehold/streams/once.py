"""``ctx.once(name, fn)``: an effect that cannot join the finish transaction, run to
completion at most once per (job, name) across attempts, as Powertools idempotency does.

The record is an item of the coordination table (``once#<job_id>``, ``name``) holding the
result as JSON and the fencing token of the attempt that wrote it, put only if absent: the
first attempt to finish ``fn`` wins, a later one (a retry, a redelivery, a re-drive) reads the
recorded result instead of calling ``fn`` again. An attempt killed after ``fn`` and before the
put runs ``fn`` again: that window is the external system's to close, with the fencing token
(refuse an older one) or its own idempotency key (``ctx.idempotency_key`` + ``name``). The
record expires with the coordination table's TTL after :data:`KEEP_SECONDS`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.dynamo import condition_failed
from leasehold.core.context import JobContext
from leasehold.lifecycle.app import Leasehold

KEEP_SECONDS = 7 * 24 * 3600


def _key(ctx: JobContext, name: str) -> dict[str, Any]:
    return {"pk": {"S": f"once#{ctx.job_id}"}, "sk": {"S": name}}


def once(app: Leasehold, ctx: JobContext, name: str, fn: Callable[[], Any]) -> Any:
    ddb = app.clients.dynamodb
    table = app.settings.coordination_table
    found = ddb.get_item(TableName=table, Key=_key(ctx, name), ConsistentRead=True).get("Item")
    if found:
        return json.loads(found["result"]["S"])
    result = fn()
    item = {**_key(ctx, name), "result": {"S": json.dumps(result)},
            "fencing_token": {"N": str(ctx.fencing_token)},
            "expires_at_s": {"N": str(app.now() // 1000 + KEEP_SECONDS)}}
    try:
        ddb.put_item(TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)")
    except ClientError as exc:
        if not condition_failed(exc):
            raise
        # Another attempt recorded first (or our own put landed and its answer was lost).
        stored = ddb.get_item(TableName=table, Key=_key(ctx, name), ConsistentRead=True)
        return json.loads(stored["Item"]["result"]["S"])
    return result


def install(app: Leasehold) -> None:
    """Give every attempt's context ``ctx.once``."""
    def equip(app: Leasehold, ctx: JobContext) -> None:
        ctx._once = partial(once, app, ctx)

    app.contexts.append(equip)
