"""A job's records (its durable steps, ``ctx.once`` results) live exactly as long as its row
(G12, L12): never gone while the row exists, and deleted by the change-stream relay when the
row is removed (retention TTL, a delete, a bulk delete), also after a lost response, a
throttle or a relay killed half-way.

DynamoDB is the embedded emulator's server (streams); SQS stays in-process moto. moto never
deletes TTL-expired items: :func:`expire` does what DynamoDB's TTL does at the clock's time.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import query
from leasehold.aws.faults import Fault, FaultInjector, InjectedCrash
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.durable import records
from leasehold.errors import NonRetryableError
from leasehold.events.publishing import FileSink
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.deletion import delete_finished
from leasehold.lifecycle.submission import submit
from leasehold.streams.poller import Checkpoint, poll
from leasehold.streams.removals import removed
from tests.conftest import MakeApp
from tests.integration.helpers import deliver

STEPS = 30  # more than one BatchWriteItem (25) of deletes
DAY_MS = 24 * 3600 * 1000


@pytest.fixture
def calls() -> list[str]:
    return []


@pytest.fixture
def app(endpoint: str, monkeypatch: pytest.MonkeyPatch, make_app: MakeApp,
        tasks: TaskRegistry) -> Leasehold:
    for service in ("DYNAMODB", "DYNAMODB_STREAMS", "DYNAMODBSTREAMS"):
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service}", endpoint)
    return make_app(events_from="stream")


@pytest.fixture
def tasks(registry: TaskRegistry, calls: list[str]) -> TaskRegistry:
    @registry.task("checkout")
    def checkout(payload: Any, ctx: JobContext) -> Any:
        for n in range(STEPS):
            ctx.step(f"s{n}", lambda n=n: calls.append(f"s{n}") or n)
        receipt = ctx.once("charge", lambda: calls.append("charge") or "receipt")
        calls.append("run")
        if calls.count("run") == 1:
            raise NonRetryableError("the first run ends DEAD after its effects")
        return receipt

    return registry


def relay(app: Leasehold, tmp_path: Path) -> int:
    return poll(app, FileSink(tmp_path / "events.jsonl"), Checkpoint(tmp_path / "relay.json"))


def kept(app: Leasehold, job_id: str) -> int:
    """How many items the coordination table keeps for ``job_id`` (records, once results)."""
    return sum(len(list(query(
        app.clients.dynamodb, TableName=app.settings.coordination_table,
        KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": pk}})))
        for pk in (records.partition(job_id), f"once#{job_id}"))


def expire(app: Leasehold, clock: FakeClock) -> None:
    """What DynamoDB's TTL does by the clock's time: delete every coordination item whose
    ``expires_at_s`` passed."""
    ddb = app.clients.dynamodb
    table = app.settings.coordination_table
    for item in ddb.scan(TableName=table)["Items"]:
        if "expires_at_s" in item and int(item["expires_at_s"]["N"]) <= clock.now_ms() // 1000:
            ddb.delete_item(TableName=table, Key={"pk": item["pk"], "sk": item["sk"]})


def finished(app: Leasehold, calls: list[str], **spec: Any) -> str:
    job = submit(app, JobSpec(task="checkout", **spec)).job.job_id
    deliver(app)
    assert app.store.get(job).state is JobState.DEAD
    assert calls.count("charge") == 1 and kept(app, job) == STEPS + 1
    return job


@pytest.mark.parametrize("fault", ["lose", "throttle", "killed half-way"])
def test_a_jobs_records_go_with_its_deleted_row_and_not_before(
        app: Leasehold, calls: list[str], tmp_path: Path, fault: str) -> None:
    job = finished(app, calls)
    # The finished (DEAD) row is retained: the relay reads its changes and deletes nothing,
    # and a re-run by hand replays every step and the once result.
    relay(app, tmp_path)
    assert kept(app, job) == STEPS + 1
    control.retry(app, job)
    deliver(app)
    assert app.store.get(job).state is JobState.SUCCEEDED
    assert calls.count("charge") == 1 and calls.count("s0") == 1
    relay(app, tmp_path)
    assert kept(app, job) == STEPS + 1

    assert delete_finished(app, [app.store.get(job)]).deleted == [job]
    batches = iter(range(100))
    injector = FaultInjector([
        Fault(target="dynamodb.BatchWriteItem", kind="crash", when=lambda _: next(batches) == 1)
        if fault == "killed half-way" else Fault(target="dynamodb.BatchWriteItem", kind=fault)])
    injector.install(app.clients.dynamodb)
    with contextlib.suppress(InjectedCrash):
        relay(app, tmp_path)
    if fault == "killed half-way":
        assert injector.dead
        injector.revive()
        assert 0 < kept(app, job) < STEPS + 1  # the first batch of deletes went
        relay(app, tmp_path)  # its checkpoint was not saved: it reads the removal again
    assert kept(app, job) == 0


def test_a_once_result_never_expires_while_its_row_is_retained(
        app: Leasehold, calls: list[str], clock: FakeClock, tmp_path: Path) -> None:
    """L12: the result used to expire 7 days after ``fn`` ran, whatever the row's life."""
    job = finished(app, calls, retention_days=30)
    clock.advance(8 * DAY_MS // 1000)
    expire(app, clock)
    control.retry(app, job)
    deliver(app)
    assert app.store.get(job).state is JobState.SUCCEEDED
    assert calls.count("charge") == 1  # read, not run again


def test_a_row_made_again_under_the_same_id_before_the_relay_reads_the_removal_keeps_its_records(
        app: Leasehold, calls: list[str], tmp_path: Path) -> None:
    """A derived id (an idempotency key's, a workflow step's) may make a new row after the
    old one went: what the partition holds then is the new job's."""
    job = finished(app, calls)
    key = job_key(job)
    row = app.clients.dynamodb.get_item(TableName=app.settings.jobs_table, Key=key,
                                        ConsistentRead=True)["Item"]
    assert delete_finished(app, [app.store.get(job)]).deleted == [job]
    app.clients.dynamodb.put_item(TableName=app.settings.jobs_table, Item=row)
    relay(app, tmp_path)
    assert kept(app, job) == STEPS + 1



@pytest.mark.ddblocal
def test_each_emulators_stream_of_a_deleted_row_takes_its_records_with_it(
        backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
        make_app: MakeApp, tasks: TaskRegistry, calls: list[str], tmp_path: Path) -> None:
    """The row is deleted on both: DynamoDB Local's TTL does not expire a table with an index
    within minutes (docs/design.md); a TTL removal's record shape is in :func:`removed`'s
    test."""
    if backend not in ("moto", "ddblocal"):
        pytest.skip("needs a DynamoDB that serves streams")
    endpoint = request.getfixturevalue("endpoint" if backend == "moto" else "dynamodb_local")
    for service in ("DYNAMODB", "DYNAMODB_STREAMS", "DYNAMODBSTREAMS"):
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service}", endpoint)
    app = make_app(events_from="stream", retention_days=3650)
    job = finished(app, calls)
    assert delete_finished(app, [app.store.get(job)]).deleted == [job]
    relay(app, tmp_path)
    assert kept(app, job) == 0


def test_a_ttl_removal_is_a_removal_in_either_name_and_a_write_is_not() -> None:
    """AWS names a TTL deletion ``REMOVE`` (``userIdentity`` dynamodb.amazonaws.com),
    DynamoDB Local ``UNKNOWN_TO_SDK_VERSION``; neither has a ``NewImage``."""
    keys = {"Keys": {"job_id": {"S": "J1"}}, "OldImage": {"job_id": {"S": "J1"}}}
    assert removed([
        {"eventName": "REMOVE", "userIdentity": {"principalId": "dynamodb.amazonaws.com"},
         "dynamodb": keys},
        {"eventName": "UNKNOWN_TO_SDK_VERSION",
         "dynamodb": {**keys, "Keys": {"job_id": {"S": "J2"}}}},
        {"eventName": "MODIFY", "dynamodb": {**keys, "NewImage": {"job_id": {"S": "J3"}}}},
        {"eventName": "INSERT", "dynamodb": {"Keys": {"job_id": {"S": "J4"}},
                                             "NewImage": {"job_id": {"S": "J4"}}}},
    ]) == ["J1", "J2"]
