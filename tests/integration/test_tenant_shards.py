"""One big tenant beyond one partition: its listing index and its admission item are sharded.

The listing merges ``Settings.tenant_shards`` index partitions into one (created_at, job_id)
order whose cursor survives paging in both directions and a change of the shard count; the
admission item is split over ``Limits.shard_count()`` items, a refused shard hands over to
another before a 429, and every slot goes back to the shard it came from, under faults too.
"""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.aws.definitions import job_key
from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.core.ids import home
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import ADMISSION_SHARD, submit
from leasehold.tenancy.admission import Limits
from leasehold.tenancy.counters import counts, slot_item
from leasehold.tenancy.listing import list_jobs

from .api_client import api_for
from .helpers import deliver, inject, live_counted_jobs, tenant_live

WRITES = "|".join(f"dynamodb.{op}" for op in ("PutItem", "UpdateItem", "TransactWriteItems"))


@pytest.fixture
def tasks(registry: TaskRegistry) -> TaskRegistry:
    registry.task("echo")(lambda payload, ctx: payload)
    return registry


def _submit_many(app: Leasehold, clock: FakeClock, count: int) -> list[tuple[int, str]]:
    """``count`` jobs, three per millisecond (ties in created_at across and within shards)."""
    rows = []
    for n in range(count):
        if n % 3 == 0:
            clock.advance(0.001)
        job = submit(app, JobSpec(task="echo", tenant="big")).job
        rows.append((job.created_at, job.job_id))
    return rows


def _pages(app: Leasehold, *, limit: int, newest_first: bool) -> list[list[str]]:
    pages, after = [], None
    while True:
        jobs, after = list_jobs(app, "big", limit=limit, after=after, newest_first=newest_first)
        pages.append([job.job_id for job in jobs])
        if after is None:
            return pages


@pytest.mark.parametrize("newest_first", [True, False])
def test_a_listing_merges_every_shard_in_one_order_across_pages(
        make_app: Any, clock: FakeClock, tasks: TaskRegistry, newest_first: bool) -> None:
    app = make_app(tenant_shards=4)
    rows = _submit_many(app, clock, 40)
    pages = _pages(app, limit=7, newest_first=newest_first)
    listed = [job_id for page in pages for job_id in page]
    expected = [job_id for _, job_id in sorted(rows, reverse=newest_first)]
    assert listed == expected  # every job once, in (created_at, job_id) order
    assert all(len(page) == 7 for page in pages[:-1])
    used = {app.clients.dynamodb.get_item(
        TableName=app.settings.jobs_table, Key=job_key(job_id)
    )["Item"]["pk"]["S"] for _, job_id in rows}
    assert used == {home("big", k) for k in range(4)}  # really spread over the shards


def test_raising_the_shard_count_keeps_every_row_and_every_cursor(
        make_app: Any, clock: FakeClock, tasks: TaskRegistry) -> None:
    app = make_app(tenant_shards=2)
    rows = _submit_many(app, clock, 12)
    first, after = list_jobs(app, "big", limit=5)
    app.settings = app.settings.with_(tenant_shards=6)  # a deploy raises the setting
    app.store.settings = app.settings  # type: ignore[attr-defined]
    rows += _submit_many(app, clock, 12)
    rest = []
    while after is not None:
        jobs, after = list_jobs(app, "big", limit=5, after=after)
        rest += jobs
    expected = [job_id for _, job_id in sorted(rows, reverse=True)]
    # The newer jobs are ahead of the first page's cursor; every older one follows it once.
    assert [j.job_id for j in first + rest] == expected[12:]


def test_a_tenant_refused_on_one_shard_is_admitted_on_another_until_all_are_full(
        make_app: Any, tasks: TaskRegistry) -> None:
    app = make_app()
    api = api_for(app, shards=4, max_live=4)  # one live slot per shard
    for _ in range(4):  # whichever shard each starts on, the full ones hand over
        assert api.post("/jobs", {"task": "echo"}).status == 201
    refused = api.post("/jobs", {"task": "echo"})
    assert refused.status == 429
    shards = [int(job.extra.get(ADMISSION_SHARD, 0))
              for job in list_jobs(app, "default", limit=10)[0]]
    assert sorted(shards) == [0, 1, 2, 3]
    assert api.get("/stats").body["live"] == 4 == counts(app, "default", 4)[1]
    deliver(app)
    for shard in range(4):  # each slot went back to the shard it was taken from
        item = app.clients.dynamodb.get_item(
            TableName=app.settings.tenants_table,
            Key={"tenant": {"S": slot_item("default", shard)}}, ConsistentRead=True)["Item"]
        assert (item["live"]["N"], item["count_SUCCEEDED"]["N"]) == ("0", "1")
    assert api.get("/stats").body["jobs"]["SUCCEEDED"] == 4
    assert api.post("/jobs", {"task": "echo"}).status == 201


@pytest.mark.ddblocal
def test_a_cap_that_does_not_divide_by_the_shards_admits_exactly_the_cap(
        make_app: Any, tasks: TaskRegistry) -> None:
    app = make_app()
    limits = {"rate": 1000, "burst": 1000, "max_live": 8, "shards": 5}  # 2+2+2+1+1
    assert Limits(**limits).shard_count() == 5
    assert sum(Limits(**limits).per_shard(5, k).max_live for k in range(5)) == 8
    api = api_for(app, **limits)
    for round_ in range(3):  # whatever order the tries take, every free slot is found
        for _ in range(8):
            assert api.post("/jobs", {"task": "echo"}).status == 201, round_
        assert api.post("/jobs", {"task": "echo"}).status == 429
        deliver(app)


def test_the_default_limits_spread_a_tenant_over_eight_items_and_small_limits_keep_one(
        app: Leasehold, tasks: TaskRegistry) -> None:
    # Concurrent admissions of one tenant must not all meet on one item (issue 21).
    assert Limits().shard_count() == 8
    assert Limits(rate=10_000, burst=20_000).shard_count() == 50
    assert Limits(rate=10_000, burst=3).shard_count() == 3  # a shard's burst stays >= 1
    assert Limits(rate=1, burst=5).shard_count() == 1  # too small to split
    assert Limits(rate=50, burst=200, max_live=2).shard_count() == 2
    api = api_for(app, rate=1, burst=5)
    job_id = api.post("/jobs", {"task": "echo"}).body["job_id"]
    assert ADMISSION_SHARD not in app.store.get(job_id).extra  # the tenant's own item
    assert tenant_live(app, shards=1) == 1


@pytest.mark.ddblocal
@pytest.mark.parametrize("kind", ["lose", "fail"])
def test_sharded_admission_leaks_no_slot_when_a_tenant_write_is_lost_or_throttled(
        make_app: Any, clock: FakeClock, tasks: TaskRegistry, kind: str) -> None:
    from leasehold.lifecycle import sweeper

    app = make_app(lease_seconds=5.0)
    api = api_for(app, shards=4, max_live=8)
    tenants = app.settings.tenants_table

    def tenant_write(params: Any) -> bool:
        return params.get("TableName") == tenants or any(
            next(iter(item.values())).get("TableName") == tenants
            for item in params.get("TransactItems", []))

    injector = inject(app, Fault(target=WRITES, kind=kind, when=tenant_write, times=3))
    for n in range(6):
        api.post("/jobs", {"task": "echo", "idempotency_key": f"k{n}"})
    injector.faults.clear()
    # A lost response on a submission's slot (its own update, issue 46) may count it twice:
    # never fewer slots than live counted jobs, and the repair returns the extra ones once
    # their bucket has closed (within 2 minutes).
    assert tenant_live(app) >= live_counted_jobs(app)
    clock.advance(60)
    sweeper.sweep(app)
    assert tenant_live(app) == live_counted_jobs(app)
    for n in range(6):  # the client retries what it did not see answered
        assert api.post("/jobs", {"task": "echo", "idempotency_key": f"k{n}"}).status in (
            200, 201)
    assert tenant_live(app) == live_counted_jobs(app) == 6
    inject(app, Fault(target=WRITES, kind=kind, when=tenant_write, times=3))
    deliver(app)
    clock.advance(60)
    sweeper.sweep(app)
    deliver(app)
    assert tenant_live(app) == live_counted_jobs(app) == 0


def test_rows_written_before_sharding_are_listed_after_the_backfill_and_free_shard_0(
        app: Leasehold, tasks: TaskRegistry) -> None:
    from leasehold.tenancy.backfill import backfill_tenant_shards

    api = api_for(app)
    # A keyed job (a derived id): listed from the index, unlike a plain job (its home).
    job_id = api.post("/jobs", {"task": "echo", "idempotency_key": "k"}).body["job_id"]
    # The row as the old code wrote it: no index shard (and no admission shard).
    app.clients.dynamodb.update_item(
        TableName=app.settings.jobs_table, Key=job_key(job_id),
        UpdateExpression="REMOVE tenant_shard")
    assert list_jobs(app, "default", limit=10)[0] == []
    assert backfill_tenant_shards(app) == 1
    assert backfill_tenant_shards(app) == 0  # idempotent
    assert [j.job_id for j in list_jobs(app, "default", limit=10)[0]] == [job_id]
    deliver(app)  # the slot goes back to shard 0, the tenant's own item
    assert tenant_live(app, shards=1) == 0 == live_counted_jobs(app)
