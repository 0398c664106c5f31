"""A task for the console tests whose outcome the test decides: it fails while its gate file
is missing and succeeds once the test creates it (so a redriven job stays out of the DLQ)."""

from __future__ import annotations

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
