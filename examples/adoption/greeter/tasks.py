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


@task("greeter.greet", input=Greeting)
def greet(request: Greeting, ctx: JobContext) -> dict[str, Any]:
    """Greets ``{"name": ...}`` and says how large ``{"bytes": n}`` is, for people. A typed
    task: a payload of the wrong shape is refused at submission, naming its field."""
    return {"greeting": f"Hello, {request.name}!", "size": humanize.naturalsize(request.bytes)}
