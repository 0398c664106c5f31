"""``POST /jobs/batch``'s lean path (issue 32): a tenant without a cap takes the batch's rate
tokens in one update per admission item, and the batch's hand-offs go out ten per
``SendMessageBatch``; under a lost response, a throttle and a process killed before the
send, every job is made once and runs."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.aws.counting import RequestCounter
from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold

from .api_client import api_for
from .helpers import deliver, inject, receive_all


@pytest.fixture
def tasks(registry: TaskRegistry) -> TaskRegistry:
    registry.task("echo")(lambda payload, ctx: payload)
    return registry


def statuses(reply: Any) -> list[int]:
    return [result["status"] for result in reply.body["results"]]


def job_ids(reply: Any) -> list[str]:
    return [r["job"]["job_id"] for r in reply.body["results"] if r["job"]]


def token_updates(counter: RequestCounter) -> int:
    return counter.snapshot().requests["dynamodb.UpdateItem"]


def test_a_batch_takes_its_tokens_in_one_update_per_admission_item_and_sends_ten_a_request(
        app: Leasehold, tasks: TaskRegistry) -> None:
    # The default limits (rate 50/s, burst 200 over 8 admission items, 25 each), no cap.
    api = api_for(app, max_live=None)
    counter = RequestCounter().attach(app.clients)
    reply = api.post("/jobs/batch", {"jobs": [{"task": "echo", "payload": i}
                                              for i in range(100)]})
    assert statuses(reply) == [201] * 100
    requests = counter.snapshot().requests
    assert requests["dynamodb.UpdateItem"] == 4  # 25 tokens from each of 4 items
    assert requests["dynamodb.PutItem"] == 100  # each job its own conditional put
    assert requests["sqs.SendMessageBatch"] == 10 and requests["sqs.SendMessage"] == 0
    assert len(receive_all(app)) == 100  # every hand-off, once


def test_the_rate_admits_a_batchs_items_as_it_would_admit_them_one_by_one(
        app: Leasehold, tasks: TaskRegistry, clock: FakeClock) -> None:
    api = api_for(app, rate=1, burst=5, max_live=None)
    reply = api.post("/jobs/batch", {"jobs": [{"task": "echo"}] * 8})
    assert statuses(reply) == [201] * 5 + [429] * 3
    refused = reply.body["results"][5]
    assert refused["error"]["code"] == "rate_limited" and refused["retry_after"] == 1
    assert refused["error"]["field"] == "jobs[5]"
    # An invalid item spends nothing, as for POST /jobs: two seconds buy two tokens.
    clock.advance(2)
    again = api.post("/jobs/batch", {"jobs": [{"task": "nope"}, {"task": "echo"},
                                              {"task": "echo"}, {"task": "echo"}]})
    assert statuses(again) == [422, 201, 201, 429]
    # Single submissions see the same item: the batch spent what they would have.
    assert api.post("/jobs", {"task": "echo"}).status == 429


def test_a_lost_token_response_over_counts_the_rate_and_makes_every_job_once(
        app: Leasehold, tasks: TaskRegistry) -> None:
    api = api_for(app, rate=1, burst=10, max_live=None)
    # The token update lands and its answer is lost: botocore sends it again, and the
    # retry finds the tokens spent (refused) or spends them twice.
    injector = inject(app, Fault(target="dynamodb.UpdateItem", kind="lose", times=1))
    reply = api.post("/jobs/batch", {"jobs": [{"task": "echo", "idempotency_key": f"k{i}"}
                                              for i in range(4)]})
    assert injector.injected
    made = statuses(reply)
    assert set(made) <= {201, 429} and made == sorted(made)  # admitted first, in order
    assert made.count(201) >= 2  # at most the 4 the lost try spent are spent again
    created = job_ids(reply)
    assert deliver(app) == len(created)
    assert all(app.store.get(j).state is JobState.SUCCEEDED for j in created)
    # The refused items, sent again, are made once; the made ones answer 200.
    injector.faults.clear()
    again = api_for(app, rate=1000, burst=1000, max_live=None).post(
        "/jobs/batch", {"jobs": [{"task": "echo", "idempotency_key": f"k{i}"}
                                 for i in range(4)]})
    assert statuses(again) == [200 if s == 201 else 201 for s in made]
    assert len(app.clients.dynamodb.scan(TableName=app.settings.jobs_table)["Items"]) == 4


@pytest.mark.parametrize("kind", ["throttle", "fail"])
def test_an_admission_item_that_does_not_answer_gives_way_to_another(
        app: Leasehold, tasks: TaskRegistry, kind: str) -> None:
    api = api_for(app, rate=100, burst=100, max_live=None)  # 4 items of 25
    # The first item asked: its update throttled (botocore's retries absorb it) or failing.
    injector = inject(app, Fault(target="dynamodb.UpdateItem", kind=kind,
                                 times=3 if kind == "throttle" else 1))
    injector.throttle_delay = 0
    reply = api.post("/jobs/batch", {"jobs": [{"task": "echo"}] * 60})
    assert statuses(reply) == [201] * 60  # the others have room for all of them
    assert injector.injected
    if kind == "fail":  # nothing answers at all: 503, not 429 (the rate did not say no)
        every = inject(app, Fault(target="dynamodb.UpdateItem", kind="fail", times=None))
        refused = api.post("/jobs/batch", {"jobs": [{"task": "echo"}] * 2})
        assert every.injected and statuses(refused) == [503, 503]
        assert refused.body["results"][0]["error"]["code"] == "overloaded"


@pytest.mark.parametrize("fault", ["fail", "crash"])
def test_hand_offs_the_batch_send_lost_are_re_sent_by_the_sweeper(
        app: Leasehold, tasks: TaskRegistry, clock: FakeClock, fault: str) -> None:
    """The rows are the outbox: a ``SendMessageBatch`` refused past botocore's retries, or
    the process killed before it (after every row's put), leaves QUEUED rows the sweeper
    hands off at their deadline. Keyed items are put first and sent after (a plain item
    sends first: ``test_submit_many.py``)."""
    api = api_for(app, max_live=None)
    injector = inject(app, Fault(target="sqs.SendMessageBatch", kind=fault, times=1))
    body = {"jobs": [{"task": "echo", "payload": i, "idempotency_key": f"k{i}"}
                     for i in range(12)]}
    if fault == "crash":
        with pytest.raises(InjectedCrash):
            api.post("/jobs/batch", body)
    else:
        assert statuses(api.post("/jobs/batch", body)) == [201] * 12
    assert injector.injected
    injector.faults.clear()
    injector.dead = False
    queued = [row["job_id"]["S"] for row in app.clients.dynamodb.scan(
        TableName=app.settings.jobs_table)["Items"]]
    assert len(queued) == 12
    # Refused, the first request of ten is lost and the second sent; killed, neither.
    assert len(receive_all(app)) == (0 if fault == "crash" else 2)
    clock.advance(app.settings.handoff_seconds + app.settings.skew_grace_seconds + 1)
    for _ in range(3):
        sweeper.sweep(app)
    deliver(app)
    assert all(app.store.get(j).state is JobState.SUCCEEDED for j in queued)


def test_items_that_share_a_key_are_still_answered_in_order(
        app: Leasehold, tasks: TaskRegistry) -> None:
    """Items of a paid batch are written side by side only when none could meet another:
    one key twice (an idempotency key, a unique key) keeps the batch in order."""
    api = api_for(app, max_live=None)
    same = api.post("/jobs/batch", {"jobs": [
        {"task": "echo", "idempotency_key": "twice"}, {"task": "echo", "payload": 1},
        {"task": "echo", "idempotency_key": "twice"}]})
    assert statuses(same) == [201, 201, 200]
    first, _, replay = same.body["results"]
    assert replay["job"]["job_id"] == first["job"]["job_id"]
    unique = api.post("/jobs/batch", {"jobs": [
        {"task": "echo", "unique": {"key": "u"}}, {"task": "echo", "unique": {"key": "u"}}]})
    assert statuses(unique) == [201, 200]
    assert unique.body["results"][1]["job"]["duplicate"] is True
    assert len(app.clients.dynamodb.scan(TableName=app.settings.jobs_table)["Items"]) == 3
