"""The application's tasks: they import their own dependency (requirements.txt), and pydantic,
whose compiled core the bundle holds for Lambda's arm64 (synth still imports it on x86_64)."""

from __future__ import annotations

from typing import Any

import humanize
from pydantic import BaseModel

from leasehold import JobContext, task


class Greeting(BaseModel):
    name: str = "world"
    bytes: int = 0


@task("greeter.greet")
def greet(payload: Any, ctx: JobContext) -> dict[str, Any]:
    """Greets ``{"name": ...}`` and says how large ``{"bytes": n}`` is, for people."""
    request = Greeting.model_validate(payload or {})
    return {"greeting": f"Hello, {request.name}!", "size": humanize.naturalsize(request.bytes)}
