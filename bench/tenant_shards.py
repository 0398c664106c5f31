"""One big tenant: its submission rate through admission with its hot keys on one partition
key or sharded, and the paper limit of each layout.

moto has no partition limits, so the measured rates show only what sharding costs the code
(more items to pick from, a listing that merges shards); the limit a real table puts on one
tenant comes from :func:`paper_limit`: DynamoDB gives one partition key ~1,000 write units/s.
"""

from __future__ import annotations

import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.local import TASKS, fake_credentials
from bench.scaling import _app, _settings
from leasehold.core.registry import load_modules
from leasehold.core.spec import JobSpec
from leasehold.errors import RateLimited
from leasehold.local import emulator
from leasehold.tenancy.admission import JOBS_PER_SHARD, Limits, submit_admitted
from leasehold.tenancy.listing import list_jobs

#: Write units one partition key takes per second.
PARTITION_WRITE_UNITS = 1_000
#: Per admitted job, on its tenant's keys: its row in one of the tenant's homes (the jobs table
#: is keyed by home, issue 46: the put, the lease and the finish, one unit each; a plain job
#: has no listing index entry) and the admission item (a transactional take and a
#: transactional give-back, two units each).
INDEX_UNITS_PER_JOB = 3
ADMISSION_UNITS_PER_JOB = 4
#: The layouts measured: (admission shards, tenant shards: its homes).
LAYOUTS = ((1, 1), (50, 32))


def paper_limit(admission_shards: int, index_shards: int) -> dict[str, Any]:
    """One tenant's sustained jobs/s before a hot partition, and which key sets it."""
    index = index_shards * PARTITION_WRITE_UNITS // INDEX_UNITS_PER_JOB
    admission = admission_shards * PARTITION_WRITE_UNITS // ADMISSION_UNITS_PER_JOB
    return {"admission_shards": admission_shards, "index_shards": index_shards,
            "index_jobs_per_second": index, "admission_jobs_per_second": admission,
            "jobs_per_second": min(index, admission),
            "bound_by": "the tenant's homes" if index <= admission else "admission items",
            "admission_shards_planned_per_job_rate": JOBS_PER_SHARD}


def measure(n: int, threads: int = 8) -> list[dict[str, Any]]:
    """Jobs/s one tenant submits through admission (``threads`` API instances, no workers),
    and the time to list its newest 50, for each layout; with ``n`` = 0 only the paper limits
    (the ``tiny`` profile: an emulator of its own would not fit its budget)."""
    if n <= 0:
        return [paper_limit(*layout) for layout in LAYOUTS]
    fake_credentials()
    load_modules((TASKS,))
    server = emulator.start()
    results = []
    try:
        for admission_shards, index_shards in LAYOUTS:
            app = _app(_settings("b" + uuid.uuid4().hex[:6], endpoint_url=server.endpoint,
                                 tenant_shards=index_shards))
            limits = Limits(rate=1e6, burst=1e6, max_live=10**8, shards=admission_shards)
            spec = JobSpec(task="bench.noop", tenant="big")
            submit_admitted(app, spec, "default", limits)  # warm: clients, queue URL
            def one(_: int, app: Any = app, limits: Limits = limits, spec: JobSpec = spec
                    ) -> int:
                """Submit as a client does: a 429 from contention is retried at once."""
                for refused in range(100):
                    try:
                        submit_admitted(app, spec, "default", limits)
                        return refused
                    except RateLimited:
                        continue
                raise RuntimeError("refused 100 times")

            started = time.monotonic()
            with ThreadPoolExecutor(threads) as pool:
                refusals = sum(pool.map(one, range(n)))
            elapsed = time.monotonic() - started
            started = time.monotonic()
            list_jobs(app, "big", limit=50)
            listed = time.monotonic() - started
            results.append({
                **paper_limit(admission_shards, index_shards), "jobs": n,
                "submitted_per_second": round(n / elapsed, 1),
                "refused_by_contention_per_job": round(refusals / n, 2),
                "list_50_seconds": round(listed, 3)})
    finally:
        server.stop()
    return results
