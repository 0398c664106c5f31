"""Listing a tenant's jobs, newest first, with filters and a resumable position.

The ``by_tenant`` index is KEYS_ONLY (cheap to keep), so filters apply to the rows fetched
with ``batch_get``; a page may hold fewer matches than asked when most rows do not match, and
the cursor always points just past the last row examined, so nothing is skipped or repeated.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold

#: Index pages read per call before returning a short page (bounds the cost of rare filters).
MAX_PAGES = 8


@dataclass(frozen=True, kw_only=True)
class JobFilter:
    states: Collection[JobState] = ()
    task: str | None = None
    pool: str | None = None

    def matches(self, job: Job) -> bool:
        return ((not self.states or job.state in self.states)
                and (self.task is None or job.task == self.task)
                and (self.pool is None or job.pool == self.pool))


def position(job: Job) -> dict[str, Any]:
    """The index key of ``job``: where a listing resumes after it."""
    return {"tenant": job.tenant, "created_at": job.created_at, "job_id": job.job_id}


def list_jobs(app: Leasehold, tenant: str, *, limit: int, where: JobFilter = JobFilter(),
              after: Mapping[str, Any] | None = None,
              newest_first: bool = True) -> tuple[list[Job], dict[str, Any] | None]:
    """Up to ``limit`` matching jobs and the position to resume from (None: no more)."""
    found: list[Job] = []
    cursor = dict(after) if after else None
    for _ in range(MAX_PAGES):
        ids, last = app.store.by_tenant(tenant, limit=max(limit, 25), cursor=cursor,
                                        newest_first=newest_first)
        jobs = app.store.batch_get(ids)
        for index, job in enumerate(jobs):
            if job.tenant != tenant:
                continue
            if where.matches(job):
                found.append(job)
            if len(found) >= limit:
                more = last is not None or index < len(jobs) - 1
                return found, (position(job) if more else None)
        if last is None:
            return found, None
        cursor = dict(last)
    return found, cursor
