"""Helpers for the flow-control tests: read a tenant's flow items past any fault."""

from __future__ import annotations

from typing import Any

from leasehold.aws.clients import Clients
from leasehold.aws.dynamo import from_av
from leasehold.flow.keys import item_key
from leasehold.lifecycle.app import Leasehold


def flow_item(app: Leasehold, tenant: str, kind: str, key: str) -> dict[str, Any] | None:
    """The tenant's ``kind`` item of ``key`` (a unique claim, a debounce window), or None."""
    raw = Clients(app.settings).dynamodb.get_item(
        TableName=app.settings.tenants_table,
        Key={"tenant": {"S": item_key(tenant, kind, key)}}, ConsistentRead=True).get("Item")
    return None if raw is None else from_av(raw)
