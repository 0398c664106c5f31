"""The limits in force for a tenant: the deployment's (``Settings``, the same on every
function) and, over them, the tenant's plan: one item of the tenants table,
``{tenant}#plan``, holding the rate, burst and live-job cap that tenant pays for.

The API's admission, a worker's ``ctx.spawn`` and ``enqueue_item`` all take their limits
from :func:`limits_for`, so one tenant has one cap however its jobs are made. (Before issue
44 each function read ``LEASEHOLD_TENANT_*`` from its own environment: an API deployed with
a cap of 1 and workers without one let an admitted parent run 25 live children.)

A plan is read at most once per :data:`PLAN_CACHE_SECONDS` per process (a ``GetItem``, not
a strongly consistent one: a new plan is in force everywhere within that, plus DynamoDB's
replication lag of well under a second).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from leasehold.aws.dynamo import from_av, to_av
from leasehold.errors import ValidationError
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy.limits import Limits

#: How long a process keeps a tenant's plan before reading it again.
PLAN_CACHE_SECONDS = 10.0
#: What a plan may set; ``max_live`` 0 means no cap.
PLAN_FIELDS = ("rate", "burst", "max_live")

_cache: dict[tuple[str, str], tuple[int, Mapping[str, Any]]] = {}
_lock = threading.Lock()


def plan_item(tenant: str) -> str:
    return f"{tenant}#plan"


def read_plan(app: Leasehold, tenant: str, *, fresh: bool = False) -> Mapping[str, Any]:
    """The tenant's plan (empty: none), as this process last read it within
    :data:`PLAN_CACHE_SECONDS`; ``fresh``: read it now."""
    key, now = (app.settings.tenants_table, tenant), app.now()
    with _lock:
        cached = _cache.get(key)
    if not fresh and cached is not None and now - cached[0] < PLAN_CACHE_SECONDS * 1000:
        return cached[1]
    response = app.clients.dynamodb.get_item(
        TableName=app.settings.tenants_table, Key={"tenant": {"S": plan_item(tenant)}})
    item = from_av(response.get("Item") or {})
    plan = {name: item[name] for name in PLAN_FIELDS if name in item}
    with _lock:
        _cache[key] = (now, plan)
    return plan


def limits_for(app: Leasehold, tenant: str, base: Limits | None = None) -> Limits:
    """The limits in force for ``tenant``: ``base`` (default: the deployment's, from the
    app's settings) with its plan's rate, burst and cap over them."""
    limits = Limits.from_settings(app.settings) if base is None else base
    plan = read_plan(app, tenant)
    if not plan:
        return limits
    changes: dict[str, Any] = {}
    if "rate" in plan:
        changes["rate"] = float(plan["rate"])
    if "burst" in plan:
        changes["burst"] = float(plan["burst"])
    if "max_live" in plan:
        changes["max_live"] = int(plan["max_live"]) or None
    return replace(limits, **changes)


def set_plan(app: Leasehold, tenant: str, *, rate: float | None = None,
             burst: float | None = None, max_live: int | None = None) -> Mapping[str, Any]:
    """Write the tenant's plan (only what is given; ``max_live`` 0: no cap), and return it.

    A cap given to a tenant that had none holds only the jobs admitted after it: count its
    live jobs in with :func:`leasehold.tenancy.backfill.count_in_live_jobs`, as for the
    deployment's own cap (which reads each tenant's plan)."""
    values = {"rate": rate, "burst": burst, "max_live": max_live}
    given = {name: value for name, value in values.items() if value is not None}
    if not given:
        raise ValidationError("plan", "give a rate, a burst or a max_live")
    if given.get("rate", 1) <= 0 or given.get("burst", 1) < 1 or given.get("max_live", 0) < 0:
        raise ValidationError("plan", "a rate above 0, a burst of at least 1, a max_live of "
                                      "0 (no cap) or more")
    names = {f"#p{i}": name for i, name in enumerate(given)}
    app.clients.dynamodb.update_item(
        TableName=app.settings.tenants_table, Key={"tenant": {"S": plan_item(tenant)}},
        UpdateExpression="SET " + ", ".join(f"#p{i} = :p{i}" for i in range(len(given))),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=to_av({f":p{i}": value
                                         for i, value in enumerate(given.values())}))
    return read_plan(app, tenant, fresh=True)


def forget_plans() -> None:
    """Drop every cached plan (tests; a process that must see a new plan at once)."""
    with _lock:
        _cache.clear()
