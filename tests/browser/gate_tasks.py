"""A task for the console tests whose outcome the test decides: it fails while its gate file
is missing and succeeds once the test creates it (so a redriven job stays out of the DLQ)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from leasehold import JobContext, task


class GateClosed(RuntimeError):
    """The gate file does not exist yet."""


@task("gate")
def gate(payload: Any, ctx: JobContext) -> dict[str, str]:
    path = Path(payload["path"])
    if not path.exists():
        raise GateClosed(f"the gate {path.name} is closed")
    return {"opened": path.name}


@task("two-steps")
def two_steps(payload: Any, ctx: JobContext) -> dict[str, Any]:
    """A durable job of two steps whose results tell their runs apart (a reset from the
    second runs it again; the first keeps its result)."""
    first = ctx.step("prepare", time.time_ns)
    second = ctx.step("charge", time.time_ns)
    return {"prepare": first, "charge": second}
