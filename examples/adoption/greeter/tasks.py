"""The application's tasks: they import their own dependency (requirements.txt)."""

from __future__ import annotations

from typing import Any

import humanize

from leasehold import JobContext, task


@task("greeter.greet")
def greet(payload: Any, ctx: JobContext) -> dict[str, Any]:
    """Greets ``{"name": ...}`` and says how large ``{"bytes": n}`` is, for people."""
    payload = payload or {}
    return {"greeting": f"Hello, {payload.get('name', 'world')}!",
            "size": humanize.naturalsize(int(payload.get("bytes", 0)))}
