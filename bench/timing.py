"""Queue wait at a steady fraction of capacity, and start lateness of delayed and cron jobs."""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from bench.local import Runtime, wait_succeeded
from leasehold.core.jobs import Job
from leasehold.core.spec import JobSpec
from leasehold.lifecycle.submission import submit
from leasehold.time import schedules


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summary(values_ms: Sequence[float]) -> dict[str, Any]:
    seconds = [v / 1000 for v in values_ms]
    return {
        "count": len(seconds),
        "p50_s": round(percentile(seconds, 50), 3), "p99_s": round(percentile(seconds, 99), 3),
        "max_s": round(max(seconds), 3) if seconds else None,
        "min_s": round(min(seconds), 3) if seconds else None,
    }


def queue_wait(runtime: Runtime, rate: float, seconds: float) -> dict[str, Any]:
    """Submit no-op jobs at ``rate`` per second for ``seconds``; queued -> started per job.

    The wait runs from the job's ``created_at`` (stamped at submission, before its row is
    written) to its ``started_at`` (stamped by the worker's lease), so it includes the
    submission's own writes: an upper bound on the time spent in the queue.
    """
    app = runtime.app()
    tenant = "q" + uuid.uuid4().hex[:10]
    total = max(1, int(rate * seconds))
    futures: list[Future[str]] = []

    def one() -> str:
        return submit(app, JobSpec(task="bench.noop", tenant=tenant)).job.job_id

    with ThreadPoolExecutor(8) as pool:
        started = time.monotonic()
        for i in range(total):
            delay = started + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            futures.append(pool.submit(one))
        ids = [f.result() for f in futures]
        achieved = total / (time.monotonic() - started)
    jobs = wait_succeeded(app, ids, timeout=120 + seconds)
    waits = [(j.first_started_at or 0) - j.created_at for j in jobs]
    return {"target_rate": round(rate, 2), "achieved_rate": round(achieved, 2),
            "seconds": seconds, **summary(waits)}


def precision(runtime: Runtime, seconds: float, delayed: int,
              delays: tuple[float, float] = (2.0, 8.0)) -> dict[str, Any]:
    """Start lateness (started - due) of delayed jobs and of a ``rate(2 seconds)`` schedule.

    Both run at once for ``seconds``; delays are random in ``delays`` (seconds, with millisecond
    parts), so
    SQS's whole-second ``DelaySeconds`` is exercised. Lateness is signed: negative is early.
    """
    app = runtime.app()
    tenant = "p" + uuid.uuid4().hex[:10]
    rng = random.Random(11)
    schedule = schedules.create(app, {"cron": "rate(2 seconds)", "task": "bench.noop"},
                                tenant=tenant)
    ids: list[str] = []
    lock = threading.Lock()

    def submit_delayed() -> None:
        gap = max(0.0, (seconds - delays[1]) / max(1, delayed))
        for _ in range(delayed):
            job = submit(app, JobSpec(task="bench.noop", tenant=tenant,
                                      delay_seconds=round(rng.uniform(*delays), 3))).job
            with lock:
                ids.append(job.job_id)
            time.sleep(gap)

    opened = app.now()
    submitter = threading.Thread(target=submit_delayed)
    submitter.start()
    time.sleep(seconds)
    submitter.join()
    closed = app.now()
    schedules.pause(app, schedule.schedule_id, tenant)  # cancels occurrences sent ahead
    delayed_jobs = wait_succeeded(app, ids, timeout=60)
    fired_ids, _ = schedules.job_ids(app, schedule.schedule_id, limit=1000)
    fired = [j for j in app.store.batch_get(fired_ids) if opened <= j.run_at <= closed - 3000]
    fired = wait_succeeded(app, [j.job_id for j in fired], timeout=60)

    def lateness(jobs: list[Job]) -> list[float]:
        return [j.first_started_at - j.run_at for j in jobs if j.first_started_at is not None]

    delayed_lateness = lateness(delayed_jobs)
    cron_lateness = lateness(fired)
    both = delayed_lateness + cron_lateness
    return {
        "seconds": seconds, "delays_s": list(delays),
        "delayed": {**summary(delayed_lateness),
                    "early": sum(1 for v in delayed_lateness if v < 0)},
        "cron_every_2s": {**summary(cron_lateness),
                          "early": sum(1 for v in cron_lateness if v < 0),
                          "not_started": len(fired) - len(cron_lateness)},
        "all": summary(both),
        "abs_p99_s": round(percentile([abs(v) / 1000 for v in both], 99), 3) if both else None,
    }


#: The emulator's SQS delay tick for :func:`precision_on_a_tick` (LocalStack's is 1 s).
TICK_SECONDS = 1.0


def precision_on_a_tick(workers: int, seconds: float, delayed: int,
                        delays: tuple[float, float]) -> dict[str, Any]:
    """:func:`precision` again, in a runtime whose emulator releases delayed SQS messages on
    a 1 s tick (``LEASEHOLD_SQS_DELAY_TICK``), as another SQS implementation does: moto
    releases each within milliseconds, so the figures measured on it flatter the scheduler.
    """
    from bench.local import runtime
    from leasehold.local.sqs_time import DELAY_TICK_ENV

    with runtime(workers=workers, env={DELAY_TICK_ENV: f"{TICK_SECONDS:g}"}) as rt:
        measured = precision(rt, seconds, delayed, delays)
    return {**measured, "workers": workers, "sqs_delay_tick_s": TICK_SECONDS}
