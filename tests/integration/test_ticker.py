"""The ticker's delayed-job promotion, its cost, and the leader lease of long-running loops."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from leasehold.aws.definitions import job_key
from leasehold.aws.queues import Queues
from leasehold.clock import FakeClock
from leasehold.core.ids import new_id, shard_of
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.time import schedules
from leasehold.time.leader import LeaderLease
from leasehold.time.ticker import run, tick
from tests.conftest import MakeApp


@pytest.fixture
def noop(registry: TaskRegistry) -> str:
    registry.task("noop")(lambda payload, ctx: None)
    return "noop"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, float]]:
    """Hand-offs as (job_id, DelaySeconds): moto delays by wall time, so we record them."""
    seen: list[tuple[str, float]] = []
    real = Queues.send

    def spy(self: Queues, pool: str, priority: str, message: Any, delay: float = 0,
            **options: Any) -> None:
        seen.append((message.job_id, delay))
        real(self, pool, priority, message, delay, **options)

    monkeypatch.setattr(Queues, "send", spy)
    return seen


def test_a_job_beyond_the_sqs_delay_is_promoted_one_tick_ahead_with_its_remaining_delay(
    app: Leasehold, clock: FakeClock, noop: str, sent: list[tuple[str, float]]
) -> None:
    job = submit(app, JobSpec(task=noop, delay_seconds=3600)).job
    assert job.state is JobState.SCHEDULED and sent == []
    clock.advance(3600 - 75)  # a tick 75 s before the job is due
    report = tick(app)
    assert report.promoted == 1
    promoted = app.store.get(job.job_id)
    assert promoted.state is JobState.QUEUED and promoted.epoch == 1
    assert sent == [(job.job_id, 75.0)]
    assert tick(app).promoted == 0  # a double tick promotes it once


def test_a_job_within_the_sqs_delay_is_sent_at_once_with_its_delay(
    app: Leasehold, noop: str, sent: list[tuple[str, float]]
) -> None:
    job = submit(app, JobSpec(task=noop, delay_seconds=600)).job
    assert job.state is JobState.QUEUED and sent == [(job.job_id, 600.0)]


def _store_future_jobs(app: Leasehold, count: int, now: int) -> None:
    """Jobs due in a month, written straight to the table (fast, as the brief asks)."""
    ddb = app.clients.dynamodb
    for start in range(0, count, 25):
        requests = []
        for i in range(start, min(count, start + 25)):
            job_id = new_id(now)
            requests.append({"PutRequest": {"Item": {
                **job_key(job_id), "state": {"S": "SCHEDULED"}, "tenant": {"S": "t"},
                "due_shard": {"N": str(shard_of(job_id, app.settings.shards))},
                "run_at": {"N": str(now + 30 * 86_400_000 + i)},
            }}})
        ddb.batch_write_item(RequestItems={app.settings.jobs_table: requests})


def _items_read_by_a_tick(app: Leasehold) -> int:
    """Items a tick reads from DynamoDB: scanned by queries plus fetched by key."""
    read = 0

    def count(parsed: dict[str, Any], model: Any, **_: Any) -> None:
        nonlocal read
        if model.name == "Query":
            read += int(parsed.get("ScannedCount", parsed.get("Count", 0)))
        elif model.name == "GetItem":
            read += 1 if parsed.get("Item") else 0
        elif model.name == "BatchGetItem":
            read += sum(len(v) for v in parsed.get("Responses", {}).values())

    events = app.clients.dynamodb.meta.events
    events.register("after-call.dynamodb", count)
    try:
        tick(app)
    finally:
        events.unregister("after-call.dynamodb", count)
    return read


# 10,000 vs 100 rather than 100,000 vs 1,000: moto's in-memory index query walks every item
# (0.6 s per query per 20,000) and writing 100,000 takes ~17 s, too slow for the suite. The
# ratio (100x) is the same; DynamoDB itself reads only the matching index range.
@pytest.mark.parametrize("stored", [100, 10_000])
def test_a_tick_reads_only_due_jobs_and_schedules_however_many_are_stored(
    make_app: MakeApp, clock: FakeClock, noop: str, stored: int, registry: TaskRegistry
) -> None:
    app = make_app(shards=2)
    now = clock.now_ms()
    _store_future_jobs(app, stored, now)
    for _ in range(5):
        submit(app, JobSpec(task=noop, delay_seconds=1800))
    for _ in range(3):
        schedules.create(app, {"task": noop, "cron": "0 12 * * *"}, tenant="t")  # not due
    clock.advance(1800 - 30)
    # The 5 due jobs: an index entry and a row each; nothing else, whatever is stored.
    assert _items_read_by_a_tick(app) == 5 * 2


def test_due_schedules_cost_reads_in_proportion_to_their_number(
    app: Leasehold, clock: FakeClock, noop: str
) -> None:
    for _ in range(4):
        schedules.create(app, {"task": noop, "cron": "@hourly"}, tenant="t")
    for _ in range(20):
        schedules.create(app, {"task": noop, "cron": "@daily", "start_at": "2026-06-01T00:00:00Z"},
                         tenant="t")
    clock.advance(3600 - 30)
    # Per due schedule: its index entry and its item (no previous run to look up).
    assert _items_read_by_a_tick(app) == 4 * 2


def test_a_standby_takes_over_within_one_lease_period_after_the_leader_dies(
    app: Leasehold, clock: FakeClock
) -> None:
    leader = LeaderLease(app, "ticker", owner="a", lease_seconds=10)
    standby = LeaderLease(app, "ticker", owner="b", lease_seconds=10)
    assert leader.acquire() and not standby.acquire()
    clock.advance(5)
    assert leader.acquire()  # renewed: expires at +15 s now
    clock.advance(9)
    assert not standby.acquire()
    # The leader dies (stops renewing). Within one lease period the standby holds it.
    clock.advance(6.001)
    assert standby.acquire() and standby.holder() == "b"
    assert not leader.acquire()
    standby.release()
    assert leader.acquire()  # a clean shutdown hands over at once


def test_a_ticker_loop_ticks_only_while_it_holds_the_lease(
    app: Leasehold, clock: FakeClock, noop: str
) -> None:
    job = submit(app, JobSpec(task=noop, delay_seconds=3600)).job
    clock.advance(3600 - 30)
    other = LeaderLease(app, "ticker", owner="other", lease_seconds=60)
    assert other.acquire()
    stop = threading.Event()
    mine = LeaderLease(app, "ticker", owner="mine", lease_seconds=60)
    loop = threading.Thread(target=run, args=(app, stop),
                            kwargs={"interval_seconds": 0.01, "lease": mine})
    loop.start()
    try:
        stop.wait(0.1)
        assert app.store.get(job.job_id).state is JobState.SCHEDULED  # standby: no ticks
        other.release()
        for _ in range(1000):  # up to 10 s: a loaded machine schedules the loop late
            if app.store.get(job.job_id).state is JobState.QUEUED:
                break
            stop.wait(0.01)
        assert app.store.get(job.job_id).state is JobState.QUEUED
    finally:
        stop.set()
        loop.join(5)
    assert mine.holder() is None  # released on stop
