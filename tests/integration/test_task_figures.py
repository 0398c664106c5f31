"""Per-task figures (``leasehold.metrics``): counts and duration / queue-wait percentiles per
task over the last hour and day, added once per worker batch, expiring by TTL, and best-effort
(a figure that cannot be written fails no job)."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.aws.faults import Fault, FaultInjector
from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Worker
from leasehold.metrics import figures
from leasehold.metrics.histogram import BOUNDS, bucket, percentile
from tests.conftest import MakeApp
from tests.integration.helpers import TenantItemWrites

UPDATE = "dynamodb.UpdateItem"



@pytest.fixture
def app(make_app: MakeApp, registry: TaskRegistry, clock: FakeClock) -> Leasehold:
    def slow(payload: Any, ctx: Any) -> Any:
        clock.advance(12)  # a 12 s run on the fixed clock
        return payload

    def boom(payload: Any, ctx: Any) -> None:
        raise ValueError("no")

    registry.task("slow")(slow)
    registry.task("boom")(boom)
    return make_app()


def _consume_all(app: Leasehold) -> int:
    url = app.queues.url("default", "normal")
    batches = 0
    while batch := app.queues.receive(url, max_messages=10):
        consume(Worker(app), batch)
        batches += 1
    return batches


def test_bucketing_and_percentiles_read_the_fixed_histogram() -> None:
    assert [bucket(s) for s in (0, 0.05, 0.06, 12, 3600, 3601)] == [0, 0, 1, 8, 14, 15]
    counts = [0] * len(BOUNDS)
    counts[bucket(0.3)] = 98  # 98 runs of 0.3 s, 2 of 100 s
    counts[bucket(100)] = 2
    assert percentile(counts, 0.5) == 0.5 and percentile(counts, 0.99) == 120
    assert percentile([0] * len(BOUNDS), 0.5) is None


def test_a_batch_adds_each_tasks_figures_in_three_writes_and_they_read_back_per_window(
        app: Leasehold, clock: FakeClock) -> None:
    slow_ids = [submit(app, JobSpec(task="slow", tenant="acme", payload=n)).job.job_id
                for n in range(8)]
    for n in range(2):
        submit(app, JobSpec(task="boom", tenant="acme", payload=n, max_attempts=1))
    submit(app, JobSpec(task="slow", tenant="other", payload=0))
    clock.advance(3)  # every job waited 3 s in the queue before a worker took it
    writes = TenantItemWrites(app, figures=True)
    assert _consume_all(app) >= 1
    # Per batch: a minute and an hour item per (tenant, task), and each tenant's day list.
    assert len(writes.items) <= 3 * 3, writes.items
    assert len(set(writes.items)) == len(writes.items)

    now = clock.now_ms()
    read = figures.read(app, "acme", now)
    by_task = {t["task"]: t for t in read["tasks"]}
    assert set(by_task) == {"slow", "boom"}
    # Each job waited 3 s plus the 12 s runs before it in its worker's batch: the stored
    # histogram answers what the jobs' own times say.
    waits = [0] * len(BOUNDS)
    for job in app.store.batch_get(slow_ids):
        assert job.started_at is not None
        waits[bucket((job.started_at - job.run_at) / 1000)] += 1
    assert by_task["slow"]["hour"] == {
        "succeeded": 8, "failed": 0, "duration_p50": 30, "duration_p99": 30,
        "wait_p50": percentile(waits, 0.5), "wait_p99": percentile(waits, 0.99)}
    assert by_task["slow"]["hour"]["wait_p99"] > 5
    assert by_task["boom"]["hour"]["failed"] == 2 and by_task["boom"]["hour"]["succeeded"] == 0
    assert by_task["slow"]["day"] == by_task["slow"]["hour"]
    # The queue-wait chart: one point a minute for the last hour, from the same items.
    assert len(read["queue_wait"]) == 60
    assert sum(point["jobs"] for point in read["queue_wait"]) == 10
    assert max(p["wait_p99"] or 0 for p in read["queue_wait"]) >= by_task["slow"]["hour"][
        "wait_p99"]
    # Another tenant's figures are its own.
    [other] = figures.read(app, "other", now)["tasks"]
    assert other["hour"]["succeeded"] == 1
    # Two hours on, the hour is empty and the day still counts them.
    later = figures.read(app, "acme", now + 2 * figures.HOUR_MS)
    slow = {t["task"]: t for t in later["tasks"]}["slow"]
    assert slow["hour"]["succeeded"] == 0 and slow["day"]["succeeded"] == 8


def test_figure_items_carry_a_ttl_and_the_tenant_counters_do_not(app: Leasehold) -> None:
    submit(app, JobSpec(task="slow", tenant="acme"))
    _consume_all(app)
    scan = app.clients.dynamodb.scan(TableName=app.settings.tenants_table)["Items"]
    expiring = {item["tenant"]["S"]: int(item["expires_at_s"]["N"]) for item in scan
                if "expires_at_s" in item}
    assert expiring and all("#task" in key for key in expiring)
    # The counters (admission slots, outcome counts) never expire.
    assert any("#task" not in item["tenant"]["S"] for item in scan)
    now_s = app.now() // 1000
    for key, at in expiring.items():
        kept = at - now_s
        assert (kept <= 2 * 3600 + 60) if "#m#" in key else (kept <= 2 * 86400 + 60), key


def test_a_figure_that_cannot_be_written_fails_no_job(app: Leasehold) -> None:
    jobs = [submit(app, JobSpec(task="slow", tenant="acme", payload=n)).job.job_id
            for n in range(4)]
    # Every figure write fails past botocore's retries (and a throttle would too).
    injector = FaultInjector([Fault(target=UPDATE, kind="fail", times=None,
                                    when=lambda params: "#task" in
                                    params["Key"].get("tenant", {}).get("S", ""))])
    injector.install(app.clients.dynamodb)
    _consume_all(app)
    assert all(app.store.get(job).state is JobState.SUCCEEDED for job in jobs)
    assert figures.read(app, "acme", app.now())["tasks"] == []
