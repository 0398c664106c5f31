"""A DLQ holds one message per DEAD job (and what no row accounts for): whatever path put a
DEAD job back (an API retry, a bulk retry, a redrive) or made it die again, the sweeper's
pass removes the copies no DEAD job needs, under lost responses, throttles and a sweeper
killed between reading the DLQ and deleting from it."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.lifecycle import deadletters
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.sweeper import sweep
from leasehold.settings import PRIORITIES

from .api_client import ApiClient
from .helpers import deliver, inject

FAILING: set[str] = set()


@pytest.fixture(autouse=True)
def tasks(registry: TaskRegistry) -> None:
    FAILING.clear()

    def flaky(payload: Any, ctx: Any) -> Any:
        if payload["name"] in FAILING:
            raise RuntimeError(f"{payload['name']} failed")
        return payload

    registry.task("flaky-copy", max_attempts=1)(flaky)


def dlq_job_ids(app: Leasehold, pool: str = "default") -> list[str]:
    """Every message of the pool's DLQs, by the job it names (read, then made visible)."""
    found = []
    for priority in PRIORITIES:
        url = app.queues.dlq_url(pool, priority)
        handles = []
        while batch := app.queues.receive(url, max_messages=10, visibility_seconds=30):
            found += [json.loads(m.body)["job_id"] for m in batch]
            handles += [m.receipt_handle for m in batch]
        app.queues.extend_all(url, handles, 0)
    return sorted(found)


def dead_three(app: Leasehold, api: ApiClient) -> dict[str, str]:
    """Jobs a, b and c DEAD, and a retried and DEAD again: four copies for three jobs."""
    FAILING.update({"a", "b", "c"})
    ids = {name: api.post("/jobs", {"task": "flaky-copy", "payload": {"name": name}})
           .body["job_id"] for name in "abc"}
    deliver(app)
    assert api.post(f"/jobs/{ids['a']}/retry").status == 200
    deliver(app)
    assert {app.store.get(i).state for i in ids.values()} == {JobState.DEAD}
    assert dlq_job_ids(app) == sorted([ids["a"], ids["a"], ids["b"], ids["c"]])
    return ids


def test_after_api_and_bulk_retries_a_sweep_leaves_one_copy_per_dead_job(
        app: Leasehold, clock: FakeClock) -> None:
    api = ApiClient(app)
    ids = dead_three(app, api)
    FAILING.clear()
    assert api.post(f"/jobs/{ids['b']}/retry").status == 200  # the API (CLI, console)
    bulk = api.post("/jobs/bulk", {"action": "retry", "filter": {"state": ["DEAD"]}})
    assert bulk.status in (200, 201, 202), bulk.body
    FAILING.add("a")  # a dies once more under the bulk retry
    for _ in range(5):
        deliver(app)
    states = {name: app.store.get(i).state for name, i in ids.items()}
    assert states == {"a": JobState.DEAD, "b": JobState.SUCCEEDED, "c": JobState.SUCCEEDED}

    report = sweep(app)
    assert dlq_job_ids(app) == [ids["a"]]  # the one DEAD job, once
    assert report.dead_letters_removed == 4
    stats = api.get("/stats").body
    assert sum(q["dead_letters"] for q in stats["queues"]) == stats["jobs"]["DEAD"] == 1


def test_a_lost_response_or_a_throttle_on_the_delete_still_removes_the_copies(
        app: Leasehold) -> None:
    api = ApiClient(app)
    ids = dead_three(app, api)
    FAILING.clear()
    for name in "bc":
        api.post(f"/jobs/{ids[name]}/retry")
    deliver(app)
    inject(app, Fault(target="sqs.DeleteMessageBatch", kind="lose"),
           Fault(target="sqs.DeleteMessageBatch", kind="throttle", times=2))
    deadletters.tidy(app, "default")
    assert dlq_job_ids(app) == [ids["a"]]


def test_a_sweeper_killed_between_reading_and_deleting_leaves_them_to_the_next_pass(
        app: Leasehold) -> None:
    api = ApiClient(app)
    ids = dead_three(app, api)
    FAILING.clear()
    api.post(f"/jobs/{ids['b']}/retry")
    deliver(app)
    killed = inject(app, Fault(target="sqs.DeleteMessageBatch", kind="crash"))
    with pytest.raises(InjectedCrash):
        deadletters.tidy(app, "default", visibility_seconds=1)
    killed.revive()  # the next sweeper process
    # Dead with what it read still invisible; once that lapses the next pass finishes.
    time.sleep(1.2)
    assert deadletters.tidy(app, "default", visibility_seconds=1) == 2
    assert dlq_job_ids(app) == sorted([ids["a"], ids["c"]])


def test_a_throttled_pass_fails_no_sweep_and_the_next_one_removes_the_copies(
        app: Leasehold, clock: FakeClock) -> None:
    api = ApiClient(app)
    ids = dead_three(app, api)
    FAILING.clear()
    api.post(f"/jobs/{ids['c']}/retry")
    deliver(app)
    injector = inject(app, Fault(target="sqs.ReceiveMessage", kind="fail", times=None))
    assert sweep(app).dead_letters_removed == 0  # logged; the sweep itself went on
    injector.faults.clear()
    clock.advance(deadletters.TIDY_EVERY_MS / 1000)
    assert sweep(app).dead_letters_removed == 2  # a's second copy, c's copy
    assert dlq_job_ids(app) == sorted([ids["a"], ids["b"]])


def test_a_pass_slower_than_its_visibility_window_keeps_the_dead_jobs_one_copy(
        app: Leasehold, monkeypatch: pytest.MonkeyPatch) -> None:
    FAILING.add("a")
    job_id = ApiClient(app).post("/jobs", {"task": "flaky-copy", "payload": {"name": "a"}}
                                 ).body["job_id"]
    deliver(app)
    assert dlq_job_ids(app) == [job_id]
    batch_get = app.store.batch_get
    slow: list[int] = []

    def slowly(ids: Any) -> Any:
        if not slow:  # the first read of the rows outlasts the messages' invisibility
            slow.append(1)
            time.sleep(1.5)
        return batch_get(ids)

    monkeypatch.setattr(app.store, "batch_get", slowly)
    deadletters.tidy(app, "default", visibility_seconds=1)
    assert dlq_job_ids(app) == [job_id]  # read twice, still the one copy, kept
