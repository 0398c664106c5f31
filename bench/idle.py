"""What an idle ``leasehold dev`` asks of AWS, and how fast it starts a job once asked.

The embedded emulator counts every request it serves by service and operation
(:class:`leasehold.local.emulator.CountedRequests`), so the count covers the whole runtime:
the API process's ticker, sweeper and autosave, and every worker process. The runtime first
settles (its loops back off while they find nothing), then the counts are read twice,
``seconds`` apart. Last, one job per priority is submitted to the idle runtime, one at a
time, each after the workers went back to long polls: its queue wait (``created_at`` to
``started_at``) shows that an idle worker still starts a job at once.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from bench.local import runtime, wait_succeeded
from leasehold.core.spec import JobSpec
from leasehold.lifecycle.submission import submit
from leasehold.local.emulator import counts
from leasehold.settings import PRIORITIES


def measure(*, workers: int = 2, settle_seconds: float, seconds: float,
            pause_seconds: float = 1.0, endpoint: str | None = None) -> dict[str, Any]:
    """``endpoint``: a bench.substrate's (it counts the same way), not the embedded one."""
    with runtime(workers=workers, endpoint=endpoint) as rt:
        time.sleep(settle_seconds)
        before = counts(rt.endpoint)
        started = time.monotonic()
        time.sleep(seconds)
        after = counts(rt.endpoint)
        elapsed = time.monotonic() - started
        grew = {op: after[op] - before.get(op, 0) for op in after}
        by_operation = {op: round(n / elapsed, 3) for op, n in
                        sorted(grew.items(), key=lambda kv: -kv[1]) if n}
        total = sum(grew.values())  # reading the counts is not counted
        app = rt.app()
        tenant = "idle" + uuid.uuid4().hex[:8]
        waits: dict[str, float] = {}
        # This process's clients connect first (created_at is stamped before the write).
        submit(app, JobSpec(task="bench.noop", tenant=tenant))
        for priority in PRIORITIES:
            time.sleep(pause_seconds)  # idle again: back to long polls
            job_id = submit(app, JobSpec(task="bench.noop", tenant=tenant,
                                         priority=priority)).job.job_id
            [job] = wait_succeeded(app, [job_id], timeout=30, poll=0.05)
            assert job.started_at is not None
            waits[priority] = round((job.started_at - job.created_at) / 1000, 3)
    return {
        "workers": workers, "settle_seconds": settle_seconds,
        "seconds": round(elapsed, 1), "requests": total,
        "requests_per_second": round(total / elapsed, 2),
        "by_operation_per_second": by_operation,
        "queue_wait_s_by_priority": waits,
    }
