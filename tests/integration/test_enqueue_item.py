"""Transactional enqueue (issue 24): a job exists exactly when the application's own
transaction commits, and the change-stream relay hands it off, once in effect.

DynamoDB is the embedded emulator's server (moto serves ``dynamodbstreams`` only as a
server); SQS stays in-process moto. The application's "orders" table is created there.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

import leasehold
from leasehold.aws.faults import Fault, FaultInjector, InjectedCrash
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.errors import ValidationError
from leasehold.events.publishing import FileSink
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.streams.enqueue import enqueue_item, hand_off, refusal
from leasehold.streams.poller import Checkpoint, poll
from leasehold.tenancy.plans import set_plan
from tests.conftest import MakeApp
from tests.integration.helpers import deliver

ORDERS = "orders"


@pytest.fixture
def runs() -> Counter[str]:
    return Counter()


@pytest.fixture
def app(endpoint: str, monkeypatch: pytest.MonkeyPatch, make_app: MakeApp,
        registry: TaskRegistry, runs: Counter[str]) -> Leasehold:
    for service in ("DYNAMODB", "DYNAMODB_STREAMS", "DYNAMODBSTREAMS"):
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service}", endpoint)

    @registry.task("ship")
    def ship(payload: Any, ctx: JobContext) -> Any:
        runs[payload["order"]] += 1
        return payload

    @registry.task("once-per-user", unique={"key": "u"})
    def once(payload: Any, ctx: JobContext) -> Any:
        return payload

    app = make_app(events_from="stream", tenant_admission_shards=1)
    ddb = app.clients.dynamodb
    with contextlib.suppress(ddb.exceptions.ResourceInUseException):
        ddb.create_table(TableName=ORDERS, BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "order",
                                                "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "order", "KeyType": "HASH"}])
    return app


def place_order(app: Leasehold, order: str, tenant: str = "acme") -> list[dict[str, Any]]:
    """The application's business transaction: a new order, and the job that ships it."""
    entries = enqueue_item(app, "ship", {"order": order}, tenant=tenant)
    app.clients.dynamodb.transact_write_items(TransactItems=[
        {"Put": {"TableName": ORDERS, "Item": {"order": {"S": order}},
                 "ConditionExpression": "attribute_not_exists(#o)",
                 "ExpressionAttributeNames": {"#o": "order"}}},
        *entries])
    return entries


def jobs_of(app: Leasehold) -> dict[str, str]:
    """order -> the job shipping it, from every row of the jobs table."""
    rows = app.clients.dynamodb.scan(TableName=app.settings.jobs_table)["Items"]
    return {app.store.get(row["job_id"]["S"]).payload["order"]: row["job_id"]["S"]
            for row in rows}


def relay(app: Leasehold, tmp_path: Path) -> int:
    return poll(app, FileSink(tmp_path / "events.jsonl"), Checkpoint(tmp_path / "relay.json"))


def test_exactly_the_committed_transactions_make_jobs_and_each_runs_once(
        app: Leasehold, runs: Counter[str], tmp_path: Path) -> None:
    ddb = app.clients.dynamodb
    ddb.put_item(TableName=ORDERS, Item={"order": {"S": "o2"}})  # o2's condition fails
    cancelled = []
    for order in ("o1", "o2", "o3"):
        try:
            place_order(app, order)
        except ddb.exceptions.TransactionCanceledException as exc:
            assert refusal(exc, 1) is None  # refused by the business write, not by ours
            cancelled.append(order)
    # The transaction of o4 lands and its caller sees an error (a lost response): the
    # caller's retry is refused by its own first write, and there is still one job.
    injector = FaultInjector([Fault(target="dynamodb.TransactWriteItems", kind="lose")])
    injector.install(ddb)
    with pytest.raises(ClientError):
        place_order(app, "o4")
    with pytest.raises(ddb.exceptions.TransactionCanceledException):
        place_order(app, "o4")
    assert cancelled == ["o2"]
    assert sorted(jobs_of(app)) == ["o1", "o3", "o4"]

    assert relay(app, tmp_path) > 0  # the hand-off: nothing else sends them
    deliver(app)
    assert runs == Counter({"o1": 1, "o3": 1, "o4": 1})
    assert all(app.store.get(job).state is JobState.SUCCEEDED for job in jobs_of(app).values())


def test_a_record_relayed_twice_or_a_relay_killed_mid_batch_still_runs_each_job_once(
        app: Leasehold, runs: Counter[str], tmp_path: Path) -> None:
    for order in ("a", "b", "c"):
        place_order(app, order)
    sends = iter(range(100))
    injector = FaultInjector([Fault(target="sqs.SendMessage", kind="crash",
                                    when=lambda _: next(sends) == 1)])
    injector.install(app.clients.sqs)
    with contextlib.suppress(InjectedCrash):
        relay(app, tmp_path)  # dies after handing off one job: its checkpoint is unsaved
    assert injector.dead
    injector.revive()
    assert relay(app, tmp_path) > 0  # reads the whole batch again: "a" is sent twice
    streams = app.clients.client("dynamodbstreams")
    arn = streams.list_streams(TableName=app.settings.jobs_table)["Streams"][0]["StreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    assert hand_off(app, streams.get_records(ShardIterator=iterator)["Records"]) == 3
    deliver(app)
    assert runs == Counter({"a": 1, "b": 1, "c": 1})


def test_a_lost_hand_off_is_repaired_by_the_sweeper(
        app: Leasehold, runs: Counter[str], clock: FakeClock) -> None:
    place_order(app, "late")  # and no relay runs
    clock.advance(app.settings.handoff_seconds + app.settings.lease_seconds + 1)
    sweeper.sweep(app)
    deliver(app)
    assert runs == Counter({"late": 1})


def test_the_tenants_live_cap_cancels_the_transaction_and_says_so(
        app: Leasehold, runs: Counter[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    set_plan(app, "small", max_live=1)
    place_order(app, "first", tenant="small")
    ddb = app.clients.dynamodb
    with pytest.raises(ddb.exceptions.TransactionCanceledException) as refused:
        place_order(app, "second", tenant="small")
    assert refusal(refused.value, 1) == "cap"
    assert sorted(jobs_of(app)) == ["first"]
    relay(app, tmp_path)
    deliver(app)  # the first ends, and gives its slot back in the same write
    assert runs == Counter({"first": 1})
    place_order(app, "third", tenant="small")
    assert sorted(jobs_of(app)) == ["first", "third"]


def test_bad_input_is_refused_before_anything_is_written(app: Leasehold) -> None:
    with pytest.raises(ValidationError, match="task"):
        enqueue_item(app, "no-such-task", {}, tenant="acme")
    with pytest.raises(ValidationError, match="unique"):
        enqueue_item(app, "ship", {"order": "x"}, tenant="acme", unique={"key": "x"})
    with pytest.raises(ValidationError, match="unique"):
        enqueue_item(app, "once-per-user", {}, tenant="acme")  # the task's default
    with pytest.raises(ValidationError, match="priority"):
        enqueue_item(app, "ship", {"order": "x"}, tenant="acme", priority="urgent")
    with pytest.raises(ValidationError, match="options"):
        enqueue_item(app, "ship", {"order": "x"}, tenant="acme", colour="red")
    assert jobs_of(app) == {}


def test_the_facade_builds_entries_with_the_composed_app(app: Leasehold) -> None:
    entries = leasehold.enqueue_item("ship", {"order": "f"}, tenant="acme", delay_seconds=5,
                                     labels={"via": "facade"})
    put = entries[0]["Put"]
    assert put["TableName"] == app.settings.jobs_table
    assert put["Item"]["handoff"] == {"S": "stream"}
    assert entries[1]["Update"]["TableName"] == app.settings.tenants_table
