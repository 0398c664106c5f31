"""Concurrent admissions of one tenant are not refused for meeting each other (issue 21).

A 429 means the tenant's rate or its live-job cap is really used up, and says which. A write
that meets concurrent transactions (``TransactionConflict``, which neither emulator
produces: injected here) moves to another of the tenant's admission items, and if every item
tried is contended the answer is 503, never 429. Under real concurrency (16 clients on the
embedded emulator, whose requests are atomic as on AWS) a tenant submitting below half its
rate is never refused.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from leasehold.aws.counting import RequestCounter
from leasehold.aws.faults import Fault
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.errors import Overloaded, RateLimited
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import ADMISSION_SHARD
from leasehold.tenancy.admission import Buckets, Limits, submit_admitted
from leasehold.tenancy.counters import slot_item

from .api_client import api_for
from .helpers import deliver, inject, live_counted_jobs, server_app, tenant_live


@pytest.fixture
def tasks(registry: TaskRegistry) -> TaskRegistry:
    registry.task("echo")(lambda payload, ctx: payload)
    return registry


def _touches(app: Leasehold, key: str) -> Any:
    """A fault filter: the call (a transaction, or a submission's own update of its slot,
    issue 46) writes the admission item ``key``."""
    def when(params: Mapping[str, Any]) -> bool:
        entries = [entry.get("Update", {}) for entry in params.get("TransactItems", [])]
        return any(entry.get("Key", {}).get("tenant", {}).get("S") == key
                   and entry.get("TableName") == app.settings.tenants_table
                   for entry in [*entries, params])
    return when


#: A submission's slot is its own update (issue 46); an item in another's transaction (a
#: retry's, a count-in's) refuses it with ``TransactionConflictException`` as it refuses a
#: transaction.
WRITES = "dynamodb.TransactWriteItems|dynamodb.UpdateItem"


def test_an_admission_item_held_by_concurrent_transactions_hands_over_to_another(
        app: Leasehold, tasks: TaskRegistry) -> None:
    api = api_for(app, shards=2)
    # Every transaction on the tenant's item 0 meets another one (on AWS: a hot item).
    injector = inject(app, Fault(target=WRITES, kind="conflict",
                                 times=None, when=_touches(app, slot_item("default", 0))))
    random.seed(3)  # the first try lands on item 0 at least once
    replies = [api.post("/jobs", {"task": "echo"}) for _ in range(4)]
    assert [r.status for r in replies] == [201] * 4, [r.body for r in replies]
    assert injector.injected[("dynamodb.UpdateItem", "conflict")] >= 1
    shards = {app.store.get(r.body["job_id"]).extra.get(ADMISSION_SHARD, 0) for r in replies}
    assert shards == {1}
    assert tenant_live(app, shards=2) == 4 == live_counted_jobs(app)


def test_admission_contended_on_every_item_answers_503_not_429_and_takes_nothing(
        app: Leasehold, tasks: TaskRegistry) -> None:
    api = api_for(app, shards=2)
    inject(app, Fault(target=WRITES, kind="conflict", times=None,
                      when=lambda params: "TransactItems" in params or
                      params.get("TableName") == app.settings.tenants_table))
    reply = api.post("/jobs", {"task": "echo"})
    assert reply.status == 503, reply.body
    assert "concurrent writes" in reply.body["error"]["message"]
    assert tenant_live(app, shards=2) == 0 == live_counted_jobs(app)


def test_a_refusal_says_whether_the_rate_or_the_cap_said_no(
        app: Leasehold, tasks: TaskRegistry) -> None:
    rate = api_for(app, rate=1, burst=2, max_live=100)
    assert [rate.post("/jobs", {"task": "echo"}, tenant="r").status for _ in range(2)] == \
        [201, 201]
    over = rate.post("/jobs", {"task": "echo"}, tenant="r")
    assert over.status == 429 and "over its rate of 1" in over.body["error"]["message"]
    capped = api_for(app, rate=1000, burst=1000, max_live=3)  # 3 items, one slot each
    assert [capped.post("/jobs", {"task": "echo"}, tenant="c").status
            for _ in range(3)] == [201] * 3
    full = capped.post("/jobs", {"task": "echo"}, tenant="c")
    assert full.status == 429
    assert "3 live jobs, its limit" in full.body["error"]["message"]
    assert "rate" not in full.body["error"]["message"]
    deliver(app)
    assert capped.post("/jobs", {"task": "echo"}, tenant="c").status == 201


def test_an_item_known_over_its_rate_is_refused_without_a_write(
        app: Leasehold, tasks: TaskRegistry) -> None:
    limits = Limits(rate=1, burst=2)
    buckets: Buckets = {}
    for _ in range(2):
        submit_admitted(app, JobSpec(task="echo"), "default", limits, None, buckets)
    with pytest.raises(RateLimited):  # learns the item is over its rate from the refusal
        submit_admitted(app, JobSpec(task="echo"), "default", limits, None, buckets)
    counter = RequestCounter().attach(app.clients)
    with pytest.raises(RateLimited, match="over its rate"):
        submit_admitted(app, JobSpec(task="echo"), "default", limits, None, buckets)
    assert counter.snapshot().total("dynamodb") == 0  # tat never decreases: known refused
    item = app.clients.dynamodb.get_item(
        TableName=app.settings.tenants_table, Key={"tenant": {"S": "default"}},
        ConsistentRead=True)["Item"]
    assert item["live"]["N"] == "2"


def test_sixteen_clients_below_half_the_rate_are_never_refused(endpoint: str) -> None:
    registry = TaskRegistry()
    registry.task("echo")(lambda payload, ctx: payload)
    app = server_app(endpoint, registry)
    limits = Limits()  # 50/s, burst 200: the defaults a new user meets
    buckets: Buckets = {}  # one API instance, shared by its request threads
    answers: Counter[str] = Counter()
    threads, each, pace = 16, 4, 20.0  # 20 submissions/s: 40% of the rate
    start = time.monotonic()

    def client(n: int) -> None:
        for i in range(each):
            time.sleep(max(0.0, start + (i * threads + n) / pace - time.monotonic()))
            try:
                submit_admitted(app, JobSpec(task="echo", payload=n), "default", limits,
                                None, buckets)
                answers["201"] += 1
            except Overloaded:
                answers["503"] += 1
            except RateLimited as refused:
                answers[f"429 {refused}"] += 1

    workers = [threading.Thread(target=client, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert answers == {"201": threads * each}, json.dumps(answers)
