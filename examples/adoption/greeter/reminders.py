"""A durable task of the application: greet now, and again after a while, without holding a
worker in between (``ctx.sleep``)."""

from __future__ import annotations

from typing import Any

from leasehold import JobContext, task


@task("greeter.remind")
def remind(payload: Any, ctx: JobContext) -> dict[str, Any]:
    """Greets ``{"name": ...}`` at once and again ``{"after_seconds": n}`` later (an hour)."""
    name = (payload or {}).get("name", "world")
    first = ctx.step("first", lambda: f"Hello, {name}!")
    ctx.sleep(float((payload or {}).get("after_seconds", 3600)))
    return {"first": first, "again": f"Hello again, {name}!"}
