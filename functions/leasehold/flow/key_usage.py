"""A tenant's concurrency keys as people see them, and pausing and resuming one.

Pausing a key sets ``paused`` on its slot item: leases refuse it (the job parks, with the
reason "paused"), running jobs finish, nothing is lost. Resuming removes it and wakes as many
parked jobs as the key has free slots. Both are single unconditional writes, idempotent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leasehold.aws.dynamo import to_av
from leasehold.core.flowcontrol import MAX_KEY_CHARS, slot_id
from leasehold.errors import ValidationError
from leasehold.flow import slots, waking
from leasehold.lifecycle.app import Leasehold

#: The most parked jobs a key's view counts (a query page of keys, never a scan of jobs).
WAITING_SHOWN = 100


@dataclass(frozen=True)
class KeyUsage:
    key: str
    in_use: int
    limit: int | None
    paused: bool
    #: Parked jobs, counted up to :data:`WAITING_SHOWN`.
    waiting: int
    waiting_jobs: tuple[str, ...] = ()


def _check(key: str) -> str:
    if not key or len(key) > MAX_KEY_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise ValidationError("key", f"a key is 1 to {MAX_KEY_CHARS} characters without "
                                     "control characters")
    return key


def usage(app: Leasehold, tenant: str, key: str) -> KeyUsage:
    slot = slot_id(tenant, _check(key))
    item = slots.read(app.clients.dynamodb, app.settings, slot)
    waiting = waking.parked(app, slot, WAITING_SHOWN)
    limit = item.get("limit")
    return KeyUsage(key=key, in_use=len(slots.holders(item)),
                    limit=None if limit is None else int(limit),
                    paused=bool(item.get(slots.PAUSED)), waiting=len(waiting),
                    waiting_jobs=tuple(waiting[:10]))


def keys(app: Leasehold, tenant: str, limit: int = 100) -> list[KeyUsage]:
    """The tenant's keys that were ever used or paused.

    The tenants table has no index by tenant: this reads its items whose ``flow_tenant`` is
    the tenant (a scan of that small table, one item per tenant, shard and key: an
    operator's view, never on a job's path).
    """
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {
        "TableName": app.settings.tenants_table,
        "FilterExpression": "flow_tenant = :t AND attribute_exists(flow_key)",
        "ExpressionAttributeValues": to_av({":t": tenant}),
        "ProjectionExpression": "flow_key"}
    while len(items) < limit:
        page = app.clients.dynamodb.scan(**kwargs)
        items += page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    names = sorted({item["flow_key"]["S"] for item in items})[:limit]
    return [usage(app, tenant, name) for name in names]


def pause(app: Leasehold, tenant: str, key: str) -> KeyUsage:
    app.clients.dynamodb.update_item(
        TableName=app.settings.tenants_table,
        Key={"tenant": {"S": slot_id(tenant, _check(key))}},
        UpdateExpression="SET paused = :yes, flow_key = :key, flow_tenant = :t",
        ExpressionAttributeValues=to_av({":yes": True, ":key": key, ":t": tenant}))
    return usage(app, tenant, key)


def resume(app: Leasehold, tenant: str, key: str) -> KeyUsage:
    slot = slot_id(tenant, _check(key))
    app.clients.dynamodb.update_item(
        TableName=app.settings.tenants_table, Key={"tenant": {"S": slot}},
        UpdateExpression="REMOVE paused SET flow_key = :key, flow_tenant = :t",
        ExpressionAttributeValues=to_av({":key": key, ":t": tenant}))
    item = slots.read(app.clients.dynamodb, app.settings, slot)
    limit = int(item.get("limit") or 1)
    waking.wake(app, slot, limit - len(slots.holders(item)))
    return usage(app, tenant, key)
