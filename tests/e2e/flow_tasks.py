"""A task for tests/e2e/test_flow.py: sleeps, and returns when its handler really ran."""

from __future__ import annotations

import time
from typing import Any

from leasehold import task


@task("timed_sleep", timeout_seconds=60)
def timed_sleep(payload: Any, ctx: Any) -> dict[str, float]:
    # The handler runs strictly inside its attempt's hold of the slot: after the lease that
    # took it committed, before the write that gives it back.
    began = time.time()
    time.sleep(float(payload["seconds"]))
    return {"began": began, "ended": time.time()}
