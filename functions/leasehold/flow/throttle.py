"""Throttles: a GCRA per tenant's key, advanced in the lease's own transaction.

The item ``{tenant}#rate#{key}`` holds ``tat``, the theoretical arrival time (epoch ms) of the
next start. With emission interval ``T = period / limit`` and tolerance ``tau = (burst - 1) *
T``, a start at ``now`` is allowed when ``max(tat, now) - now <= tau``; it sets ``tat`` to
``max(tat, now) + T``, conditioned on ``tat`` being what was read, so two racing leases never
take the same turn (the loser reads again). Over the rate, the job is delayed to ``tat - tau``
with a new message, never dropped. So in any window of length ``W`` a key starts at most
``burst + W / T`` jobs: its rate, allowing one period of burst.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leasehold.aws.dynamo import to_av
from leasehold.lifecycle.store import Refusal
from leasehold.settings import Settings


def interval_ms(throttle: Mapping[str, Any]) -> float:
    return int(throttle["period_ms"]) / int(throttle["limit"])


def take(ddb: Any, settings: Settings, throttle: Mapping[str, Any], now: int
         ) -> dict[str, Any]:
    """The lease's entry taking a turn, or :class:`Refusal` until the next turn."""
    response = ddb.get_item(TableName=settings.tenants_table,
                            Key={"tenant": {"S": throttle["item"]}}, ConsistentRead=True)
    seen = response.get("Item", {}).get("tat")
    tat = int(seen["N"]) if seen else None
    step = interval_ms(throttle)
    tolerance = (int(throttle["burst"]) - 1) * step
    start = max(tat or now, now)
    if start - now > tolerance:
        raise Refusal(int(start - tolerance) + 1)
    values: dict[str, Any] = {":new": int(start + step), ":key": throttle["key"]}
    if tat is None:
        condition = "attribute_not_exists(tat)"
    else:
        condition = "tat = :seen"
        values[":seen"] = tat
    return {"Update": {
        "TableName": settings.tenants_table, "Key": {"tenant": {"S": throttle["item"]}},
        "UpdateExpression": "SET tat = :new, flow_key = :key",
        "ConditionExpression": condition, "ExpressionAttributeValues": to_av(values)}}
