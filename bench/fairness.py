"""Noisy neighbour: a quiet tenant's queue wait while another tenant floods the runtime.

Tenant B submits at 5% of the runtime's capacity, first alone, then while tenant A submits
at 5x capacity. Both submit through admission (:func:`submit_admitted`, the code the API's
``POST /jobs`` runs, in this process: the local gateway could not carry 5x capacity of
requests, and that would measure the gateway, not the scheduler) with the per-tenant limits
an operator would set (:func:`operator_limits`). B's wait is ``first_started_at -
created_at`` per job, as in :func:`bench.timing.queue_wait`.

What keeps B's wait short: admission refuses A's submissions beyond its rate (429), and what
A gets admitted sits in the same queue as B's jobs, where the emulator's fair queues
(:mod:`leasehold.local.fair_queues`, as SQS fair queues on AWS) hand out B's messages first.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.local import Runtime, wait_succeeded
from bench.timing import summary
from leasehold.core.spec import JobSpec
from leasehold.errors import Overloaded, RateLimited
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy.admission import Backlog, Buckets, Limits, submit_admitted

#: Seconds of each phase (B alone, then A and B together), by bench profile.
SECONDS = {"full": 30.0, "quick": 3.0, "tiny": 0.5}
NOISY_FACTOR = 5.0
QUIET_FACTOR = 0.05


def operator_limits(capacity: float) -> Limits:
    """Per-tenant limits sized to the fleet, as an operator of a shared fleet would set them.

    * rate: half the fleet's capacity, so no single tenant can keep it saturated;
    * burst: two seconds of that rate, at least 10 (a client's short spike passes, a flood
      does not);
    * live jobs: 30 s of that rate, so a tenant whose jobs stall cannot pile up without end;
    * global backlog: the default (100,000), far above anything here: it answers every
      tenant 503, so it is a last resort for the queue, not a fairness tool.
    """
    rate = max(1.0, capacity / 2)
    return Limits(rate=round(rate, 2), burst=round(max(10.0, 2 * rate), 2),
                  max_live=max(10, int(30 * rate)))


class Tenant:
    """One tenant submitting no-op jobs through admission at a steady rate.

    Its threads share one view of the bucket, as concurrent requests to one API instance
    would; concurrent spends of the same bucket that keep colliding are refused too ("is
    submitting too fast", 429), and count as refused.
    """

    def __init__(self, app: Leasehold, name: str, limits: Limits, backlog: Backlog) -> None:
        self.app, self.name, self.limits, self.backlog = app, name, limits, backlog
        self.buckets: Buckets = {}  # one API instance's view of the buckets, as in the API
        self.admitted: list[str] = []
        self.outcomes: Counter[str] = Counter()
        self._lock = threading.Lock()

    def submit_one(self) -> None:
        try:
            job = submit_admitted(self.app, JobSpec(task="bench.noop", tenant=self.name),
                                  "default", self.limits, self.backlog, self.buckets).job
        except Overloaded:
            outcome = "overloaded"
        except RateLimited:
            outcome = "refused"
        except Exception:
            outcome = "error"
        else:
            outcome = "admitted"
            with self._lock:
                self.admitted.append(job.job_id)
        with self._lock:
            self.outcomes[outcome] += 1


def paced(rate: float, seconds: float, action: Callable[[], None], pool: ThreadPoolExecutor
          ) -> float:
    """Call ``action`` on ``pool`` at ``rate`` per second for ``seconds`` (at least 3 calls);
    returns the rate of calls made. A call still queued when the time is up is dropped, so a
    pool that cannot keep up lowers the rate instead of stretching the phase."""
    total = max(3, int(rate * seconds))
    gap = seconds / total
    started = time.monotonic()
    deadline = started + seconds + 1.0
    made: list[bool] = []

    def call() -> None:
        if time.monotonic() < deadline:
            made.append(True)
            action()

    futures = []
    for i in range(total):
        delay = started + i * gap - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        futures.append(pool.submit(call))
    for future in futures:
        future.result()
    return len(made) / max(1e-9, time.monotonic() - started)


def _waits(app: Leasehold, ids: list[str], timeout: float) -> list[float]:
    jobs = wait_succeeded(app, ids, timeout=timeout)
    return [(j.first_started_at or 0) - j.created_at for j in jobs]


def noisy_neighbour(runtime: Runtime, capacity: float, seconds: float) -> dict[str, Any]:
    """B alone for ``seconds``, then A at 5x capacity and B together for ``seconds``."""
    app = runtime.app()
    limits = operator_limits(capacity)
    backlog = Backlog()
    run = uuid.uuid4().hex[:8]
    quiet_rate, noisy_rate = QUIET_FACTOR * capacity, NOISY_FACTOR * capacity

    alone = Tenant(app, f"quiet-alone-{run}", limits, backlog)
    with ThreadPoolExecutor(4) as pool:
        alone_rate = paced(quiet_rate, seconds, alone.submit_one, pool)
    alone_waits = _waits(app, alone.admitted, 60 + seconds)

    quiet = Tenant(app, f"quiet-{run}", limits, backlog)
    noisy = Tenant(app, f"noisy-{run}", limits, backlog)
    rates: dict[str, float] = {}
    with ThreadPoolExecutor(16) as noisy_pool, ThreadPoolExecutor(4) as quiet_pool:
        flood = threading.Thread(target=lambda: rates.update(
            noisy=paced(noisy_rate, seconds, noisy.submit_one, noisy_pool)))
        flood.start()
        rates["quiet"] = paced(quiet_rate, seconds, quiet.submit_one, quiet_pool)
        flood.join()
    quiet_waits = _waits(app, quiet.admitted, 60 + seconds)
    # A's backlog is not waited for (it would cost the run its length again): its waits are
    # those of its jobs started by the time B's last one was.
    noisy_waits = [j.first_started_at - j.created_at for j in app.store.batch_get(noisy.admitted)
                   if j.first_started_at is not None]

    b_alone, b_with = summary(alone_waits), summary(quiet_waits)
    ratio = (b_with["p99_s"] / b_alone["p99_s"]) if b_alone["p99_s"] else None
    return {
        "seconds_per_phase": seconds, "capacity_jobs_per_second": round(capacity, 2),
        "limits": {"rate": limits.rate, "burst": limits.burst, "max_live": limits.max_live,
                   "max_backlog": limits.max_backlog},
        "fair_queues": "emulated in the embedded emulator (leasehold.local.fair_queues)",
        "quiet_alone": {"target_rate": round(quiet_rate, 2), "achieved_rate":
                        round(alone_rate, 2), **dict(alone.outcomes), **b_alone},
        "quiet_with_noisy": {"target_rate": round(quiet_rate, 2),
                             "achieved_rate": round(rates["quiet"], 2),
                             **dict(quiet.outcomes), **b_with},
        "noisy": {"target_rate": round(noisy_rate, 2),
                  "attempted_rate": round(rates["noisy"], 2),
                  "attempted": sum(noisy.outcomes.values()),
                  "admitted": noisy.outcomes["admitted"], "refused": noisy.outcomes["refused"],
                  "overloaded": noisy.outcomes["overloaded"], "errors": noisy.outcomes["error"],
                  "started_by_end": len(noisy_waits), "wait": summary(noisy_waits)},
        "p99_ratio": round(ratio, 2) if ratio is not None else None,
    }
