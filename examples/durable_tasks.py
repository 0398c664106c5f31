"""Durable example tasks (``leasehold dev --tasks examples.tasks,examples.durable_tasks``):
steps kept across retries, a sleep that frees the worker, a callback, children awaited."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from leasehold import CallbackTimeout, JobContext, RetryPolicy, task

FAST = RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0.5)


@task("durable-order", retry=FAST)
def durable_order(payload: Any, ctx: JobContext) -> dict[str, Any]:
    """Charges once (a step), fails its first attempt after that, then ships. ``ledger``:
    a file each real charge appends a line to."""

    def charge() -> str:
        charge_id = f"{ctx.idempotency_key}:charge:{uuid.uuid4().hex[:6]}"
        with Path(payload["ledger"]).open("a", encoding="utf-8") as ledger:
            ledger.write(charge_id + "\n")
        return charge_id

    charged = ctx.step("charge", charge)
    if ctx.attempt == 1:
        raise ConnectionError("the shipping service is down (after the charge)")
    return {"charged": charged, "shipped": ctx.step("ship", lambda: "shipped"),
            "attempt": ctx.attempt}


@task("durable-nap", retry=FAST)
def durable_nap(payload: Any, ctx: JobContext) -> str:
    """Sleeps ``seconds`` without holding a worker."""
    ctx.sleep(payload["seconds"])
    return "rested"


@task("durable-approval", retry=FAST)
def durable_approval(payload: Any, ctx: JobContext) -> Any:
    """Waits for a callback; its token is in the job's progress."""
    cb = ctx.callback("approve", timeout_seconds=payload["timeout"])
    ctx.heartbeat({"callback": cb.token})
    try:
        return {"approved": cb.wait()}
    except CallbackTimeout:
        return "timed out"


@task("durable-child")
def durable_child(payload: Any, ctx: JobContext) -> int:
    return int(payload) * 2


@task("durable-fanout", retry=FAST, timeout_seconds=60)
def durable_fanout(payload: Any, ctx: JobContext) -> list[Any]:
    """Spawns ``payload`` children and returns their results."""
    ids = [ctx.spawn("durable-child", i) for i in range(payload)]
    return [child["result"] for child in ctx.wait_for(ids)]
