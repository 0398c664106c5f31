"""The embedded emulator runs in a child process and makes each DynamoDB request atomic."""

from __future__ import annotations

import socket
import threading
from collections import Counter
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from leasehold.aws.clients import Clients
from leasehold.aws.definitions import TABLES, queues
from leasehold.aws.provision import create_all
from leasehold.local import emulator, snapshots
from leasehold.local.emulator import counts
from leasehold.settings import Settings


def client(endpoint: str, service: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1",  # type: ignore[call-overload]
                        aws_access_key_id="x", aws_secret_access_key="x")


def test_two_concurrent_conditional_writes_never_both_succeed(endpoint: str) -> None:
    ddb = client(endpoint, "dynamodb")
    ddb.create_table(TableName="race", BillingMode="PAY_PER_REQUEST",
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
    ddb.put_item(TableName="race", Item={"pk": {"S": "lease"}, "epoch": {"N": "0"}})
    rounds = 150
    barrier = threading.Barrier(2)
    wins: Counter[int] = Counter()
    codes: Counter[str] = Counter()
    lock = threading.Lock()

    def contender(name: str) -> None:
        mine = client(endpoint, "dynamodb")
        for epoch in range(rounds):
            barrier.wait()
            # The lease protocol's shape: move epoch e -> e+1 only if it is still e.
            try:
                mine.update_item(
                    TableName="race", Key={"pk": {"S": "lease"}},
                    UpdateExpression="SET epoch = :next, #owner = :me",
                    ConditionExpression="epoch = :e",
                    ExpressionAttributeNames={"#owner": "owner"},
                    ExpressionAttributeValues={":e": {"N": str(epoch)},
                                               ":next": {"N": str(epoch + 1)},
                                               ":me": {"S": name}})
            except ClientError as exc:
                with lock:
                    codes[exc.response["Error"]["Code"]] += 1
                continue
            with lock:
                wins[epoch] += 1

    threads = [threading.Thread(target=contender, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(codes) == {"ConditionalCheckFailedException"}
    assert set(wins.values()) == {1}, "two writers passed the same condition"
    assert len(wins) == rounds  # every round, exactly one writer won
    item = ddb.get_item(TableName="race", Key={"pk": {"S": "lease"}})["Item"]
    assert item["epoch"]["N"] == str(rounds)


def test_the_runtime_creates_the_resources_the_definitions_describe(endpoint: str) -> None:
    settings = Settings(endpoint_url=endpoint, queue_prefix="defs", jobs_table="defs-jobs",
                        schedules_table="defs-schedules", tenants_table="defs-tenants",
                        coordination_table="defs-coord", workflows_table="defs-workflows")
    create_all(Clients(settings), settings)
    ddb, sqs = client(endpoint, "dynamodb"), client(endpoint, "sqs")
    for table in TABLES:
        described = ddb.describe_table(TableName=table.table_name(settings))["Table"]
        expected = table.create_table_kwargs(settings)
        assert described["KeySchema"] == expected["KeySchema"]
        assert sorted(i["IndexName"] for i in described.get("GlobalSecondaryIndexes", [])) == \
            sorted(i["IndexName"] for i in expected.get("GlobalSecondaryIndexes", []))
    names = {url.rsplit("/", 1)[-1] for url in sqs.list_queues(QueueNamePrefix="defs")["QueueUrls"]}
    for queue in queues(settings):
        assert {queue.name(settings), queue.dlq_name(settings)} <= names


def test_the_emulator_counts_requests_by_service_and_operation(endpoint: str) -> None:
    before = counts(endpoint)
    ddb, sqs = client(endpoint, "dynamodb"), client(endpoint, "sqs")
    ddb.list_tables()
    ddb.list_tables()
    sqs.create_queue(QueueName="counted")
    after = counts(endpoint)
    grew = {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)}
    assert grew == {"dynamodb ListTables": 2, "sqs CreateQueue": 1}


def test_a_snapshot_holds_the_items_a_scan_reads_and_is_skipped_while_nothing_is_written(
        endpoint: str) -> None:
    ddb = client(endpoint, "dynamodb")
    for name in ("snap-a", "snap-b"):
        ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                         KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                         AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
    ddb.put_item(TableName="snap-a", Item={
        "pk": {"S": "job"}, "n": {"N": "1.5"}, "ok": {"BOOL": True}, "none": {"NULL": True},
        "tags": {"SS": ["x", "y"]}, "nums": {"NS": ["1", "2"]},
        "extra": {"M": {"deep": {"L": [{"S": "a"}, {"M": {"k": {"N": "3"}}}]}}}})
    ddb.put_item(TableName="snap-b", Item={"pk": {"S": "tenant"}, "live": {"N": "1"}})
    region = ddb.meta.region_name
    cut = snapshots.take(endpoint, region, ["snap-a", "snap-b"])
    assert cut.tables is not None
    for name in ("snap-a", "snap-b"):
        assert cut.tables[name] == ddb.scan(TableName=name)["Items"]
    assert snapshots.take(endpoint, region, ["snap-a"], unless=cut.sequence).tables is None
    ddb.get_item(TableName="snap-a", Key={"pk": {"S": "job"}})  # a read changes nothing
    assert snapshots.take(endpoint, region, ["snap-a"], unless=cut.sequence).tables is None
    ddb.delete_item(TableName="snap-b", Key={"pk": {"S": "tenant"}})
    later = snapshots.take(endpoint, region, ["snap-a", "snap-b"], unless=cut.sequence)
    assert later.tables is not None and later.tables["snap-b"] == []
    assert later.sequence > cut.sequence


def test_an_emulator_that_cannot_start_says_why() -> None:
    # A port another process holds: the child fails to listen, and its error is the message
    # (its stderr used to be discarded, which left only '').
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(RuntimeError) as failed:
            emulator.start(port=taken.getsockname()[1], timeout=30)
    assert "the embedded AWS emulator did not start" in str(failed.value)
    assert "Address already in use" in str(failed.value)
