"""Listing a tenant's jobs, newest first, with filters and a resumable position.

A tenant's rows are spread over ``Settings.tenant_shards`` shards. Each shard is two
streams, merged: the rows of the tenant's home in the jobs table (a ``Query`` of the table
itself: time-ordered ids, so id order is creation order, read whole; issue 46), and the
sparse ``by_tenant_shard`` index's entries for the rest (derived ids: keyed jobs, workflow
steps, children, schedule and trigger runs), KEYS_ONLY, whose rows are fetched with
``batch_get``. Filters apply to the rows; a page may hold fewer matches than asked when most
rows do not match, and the cursor always points just past the last row examined, so nothing
is skipped or repeated.

A listing reads each shard lazily, in created_at order, and merges them in one total order,
(created_at, job_id): rows with equal created_at are put in job_id order within a shard
(DynamoDB's own order of an index's ties is its own), and the cursor is the (created_at,
job_id) of the last row examined. Resuming queries every shard from that created_at on
(inclusive) and drops what lies at or before the cursor, so the cursor does not depend on
which shard a row lives in, nor on the shard count.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from leasehold.core.jobs import CODE_VERSION, Job
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold

#: Index pages read per call before returning a short page (bounds the cost of rare filters).
MAX_PAGES = 8


@dataclass(frozen=True, kw_only=True)
class JobFilter:
    """What a listing keeps (every given condition must hold).

    Only the created-time range uses the index (its sort key): the listing starts at
    ``created_before`` and stops at ``created_after``, so it reads only that range. Every
    other condition is tested on the rows read in that range (a bounded scan of the tenant's
    listing: ``MAX_PAGES`` index pages per call, then a short page and a cursor).
    """

    states: Collection[JobState] = ()
    task: str | None = None
    pool: str | None = None
    #: ``{name: value}``: the job carries every one of these labels.
    labels: Mapping[str, str] = field(default_factory=dict)
    #: The last error's class, or one of its bases (``TimeoutError`` matches a subclass).
    error_type: str | None = None
    #: The last error's message starts with this.
    error_prefix: str | None = None
    id_prefix: str | None = None
    #: Created at or after / before this time (epoch ms): the index range.
    created_after: int | None = None
    created_before: int | None = None
    #: The code version that first ran the job (issue 36).
    code_version: str | None = None
    #: A feature's own test of a row that passed every other (durable's ``patch``: it reads
    #: the job's records).
    also: Callable[[Job], bool] | None = None

    def matches(self, job: Job) -> bool:
        return self._plain(job) and (self.also is None or self.also(job))

    def _plain(self, job: Job) -> bool:
        error = job.error
        return ((not self.states or job.state in self.states)
                and (self.task is None or job.task == self.task)
                and (self.pool is None or job.pool == self.pool)
                and all(job.labels.get(k) == v for k, v in self.labels.items())
                and (self.error_type is None or (error is not None and (
                    error.type == self.error_type or self.error_type in error.types)))
                and (self.error_prefix is None or (
                    error is not None and error.message.startswith(self.error_prefix)))
                and (self.id_prefix is None or job.job_id.startswith(self.id_prefix))
                and (self.created_after is None or job.created_at >= self.created_after)
                and (self.created_before is None or job.created_at < self.created_before)
                and (self.code_version is None
                     or job.extra.get(CODE_VERSION) == self.code_version))


Row = tuple[int, str]  # (created_at, job_id): the listing's total order


def position(tenant: str, row: Row) -> dict[str, Any]:
    """Where a listing resumes after ``row``."""
    return {"tenant": tenant, "created_at": row[0], "job_id": row[1]}


def _indexed_rows(app: Leasehold, tenant: str, shard: int, *, page: int, newest_first: bool,
                  bound: int | None) -> Iterator[Row]:
    cursor: Mapping[str, Any] | None = None
    while True:
        rows, cursor = app.store.by_tenant(tenant, shard, limit=page, cursor=cursor,
                                           newest_first=newest_first, bound=bound)
        yield from rows
        if cursor is None:
            return


def _home_rows(app: Leasehold, tenant: str, shard: int, *, page: int, newest_first: bool,
               bound: int | None, read: dict[str, Job]) -> Iterator[Row]:
    """The rows of the tenant's home ``shard``, in (created_at, job_id) order; each row read
    is kept in ``read`` so that nobody reads it again."""
    cursor: Mapping[str, Any] | None = None
    while True:
        jobs, cursor = app.store.at_home(tenant, shard, limit=page, cursor=cursor,
                                         newest_first=newest_first, bound=bound)
        for job in jobs:
            read[job.job_id] = job
            yield job.created_at, job.job_id
        if cursor is None:
            return


def _shard_rows(app: Leasehold, tenant: str, shard: int, *, page: int, newest_first: bool,
                bound: int | None, read: dict[str, Job]) -> Iterator[Row]:
    return heapq.merge(
        _in_order(_indexed_rows(app, tenant, shard, page=page, newest_first=newest_first,
                                bound=bound), newest_first),
        _home_rows(app, tenant, shard, page=page, newest_first=newest_first, bound=bound,
                   read=read),
        reverse=newest_first)


def _in_order(rows: Iterator[Row], newest_first: bool) -> Iterator[Row]:
    """``rows`` (in created_at order) with each run of equal created_at sorted by job_id."""
    for _, tied in itertools.groupby(rows, key=lambda row: row[0]):
        yield from sorted(tied, reverse=newest_first)


def merged(app: Leasehold, tenant: str, *, page: int, newest_first: bool = True,
           after: Row | None = None, read: dict[str, Job] | None = None) -> Iterator[Row]:
    """Every row of the tenant after ``after``, all shards merged in (created_at, job_id)
    order (descending if ``newest_first``); each shard is read a page at a time, on demand.
    ``read``: where the rows read whole on the way (its homes') are kept, by id."""
    bound = None if after is None else after[0]
    kept: dict[str, Job] = {} if read is None else read
    streams = [_shard_rows(app, tenant, shard, page=page, newest_first=newest_first,
                           bound=bound, read=kept)
               for shard in range(app.settings.tenant_shards)]
    rows = heapq.merge(*streams, reverse=newest_first)
    if after is None:
        return rows
    if newest_first:
        return itertools.dropwhile(lambda row: row >= after, rows)
    return itertools.dropwhile(lambda row: row <= after, rows)


def list_jobs(app: Leasehold, tenant: str, *, limit: int, where: JobFilter = JobFilter(),
              after: Mapping[str, Any] | None = None,
              newest_first: bool = True) -> tuple[list[Job], dict[str, Any] | None]:
    """Up to ``limit`` matching jobs and the position to resume from (None: no more)."""
    found: list[Job] = []
    chunk = max(limit, 25)
    start = None if not after else (int(after["created_at"]), str(after["job_id"]))
    if start is None and newest_first and where.created_before is not None:
        start = (where.created_before, "")  # the range's end: rows before it (index bound)
    elif start is None and not newest_first and where.created_after is not None:
        start = (where.created_after - 1, "\uffff")
    read: dict[str, Job] = {}
    rows = merged(app, tenant, page=chunk, newest_first=newest_first, after=start, read=read)
    low, high = where.created_after, where.created_before
    if newest_first and low is not None:  # the range's start: stop there
        rows = itertools.takewhile(lambda row: row[0] >= low, rows)
    elif not newest_first and high is not None:
        rows = itertools.takewhile(lambda row: row[0] < high, rows)
    last: Row | None = None
    for _ in range(MAX_PAGES):
        batch = list(itertools.islice(rows, chunk))
        jobs = {row[1]: read.pop(row[1]) for row in batch if row[1] in read}
        jobs.update({job.job_id: job for job in app.store.batch_get(
            [row[1] for row in batch if row[1] not in jobs])})
        for index, row in enumerate(batch):
            last = row
            job = jobs.get(row[1])
            if job is None or job.tenant != tenant:
                continue
            if where.matches(job):
                found.append(job)
            if len(found) >= limit:
                more = index < len(batch) - 1 or next(rows, None) is not None
                return found, (position(tenant, row) if more else None)
        if len(batch) < chunk:
            return found, None
    return found, (None if last is None else position(tenant, last))
