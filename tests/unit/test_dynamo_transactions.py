"""The emulator's per-item undo: transactions commit and roll back as moto's own do."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb import models

from leasehold.local import dynamo_transactions


def _scenario() -> tuple[list[dict[str, Any]], bool]:
    """Items after a committed and a cancelled transaction; whether the table was copied."""
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        for name, keys in (("t", ["k"]), ("r", ["k", "s"])):
            ddb.create_table(
                TableName=name, BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in keys],
                KeySchema=[{"AttributeName": a, "KeyType": kind}
                           for a, kind in zip(keys, ("HASH", "RANGE"), strict=False)])
        backend = models.dynamodb_backends["123456789012"]["us-east-1"]
        table = backend.tables["t"]
        ddb.put_item(TableName="t", Item={"k": {"S": "a"}, "n": {"N": "1"}})
        ddb.put_item(TableName="t", Item={"k": {"S": "gone"}})
        ddb.put_item(TableName="r", Item={"k": {"S": "a"}, "s": {"S": "1"}, "n": {"N": "1"}})
        ddb.transact_write_items(TransactItems=[
            {"Update": {"TableName": "t", "Key": {"k": {"S": "a"}},
                        "UpdateExpression": "ADD n :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}}}},
            {"Put": {"TableName": "t", "Item": {"k": {"S": "b"}}}}])
        with pytest.raises(ddb.exceptions.TransactionCanceledException):
            ddb.transact_write_items(TransactItems=[
                {"Update": {"TableName": "t", "Key": {"k": {"S": "a"}},
                            "UpdateExpression": "ADD n :one",
                            "ExpressionAttributeValues": {":one": {"N": "10"}}}},
                {"Put": {"TableName": "t", "Item": {"k": {"S": "new"}}}},
                {"Delete": {"TableName": "t", "Key": {"k": {"S": "gone"}}}},
                {"Update": {"TableName": "r", "Key": {"k": {"S": "a"}, "s": {"S": "1"}},
                            "UpdateExpression": "SET n = :x",
                            "ExpressionAttributeValues": {":x": {"N": "7"}}}},
                {"Put": {"TableName": "t", "Item": {"k": {"S": "b"}},
                         "ConditionExpression": "attribute_not_exists(k)"}}])
        items = sorted(ddb.scan(TableName="t")["Items"], key=lambda i: i["k"]["S"])
        items += ddb.scan(TableName="r")["Items"]
        return items, backend.tables["t"] is not table


@pytest.fixture(autouse=True)
def _moto_as_shipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from moto's own transactions, whatever an earlier test in this
    process installed (the state machine's phantoms group installs the per-item undo for
    good), and leaves moto as it found it."""
    monkeypatch.setattr(models, "copy", models.copy)
    monkeypatch.setattr(models.DynamoDBBackend, "transact_write_items",
                        models.DynamoDBBackend.transact_write_items)
    monkeypatch.setattr(models.DynamoDBBackend, "_leasehold_item_undo",
                        getattr(models.DynamoDBBackend, "_leasehold_item_undo", None),
                        raising=False)
    dynamo_transactions.uninstall()


def test_a_cancelled_transaction_leaves_every_item_as_moto_s_rollback_does() -> None:
    theirs, copied = _scenario()
    assert copied  # moto's rollback puts a whole copy of the table back
    dynamo_transactions.install()
    ours, copied = _scenario()
    assert not copied  # the same table, its items put back
    assert ours == theirs
    assert [i["k"]["S"] for i in ours[:3]] == ["a", "b", "gone"]
    assert ours[0]["n"] == {"N": "2"} and ours[3]["n"] == {"N": "1"}


def _stream_after_a_cancelled_admission() -> list[tuple[str, str]]:
    """The stream of a jobs-like table after a committed put and an admission-shaped
    transaction (the row's put, then a tenant item whose condition fails) that was cancelled:
    each record's event name and key."""
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        for name in ("jobs", "tenants"):
            ddb.create_table(
                TableName=name, BillingMode="PAY_PER_REQUEST",
                AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                StreamSpecification={"StreamEnabled": True,
                                     "StreamViewType": "NEW_AND_OLD_IMAGES"})
        ddb.put_item(TableName="jobs", Item={"k": {"S": "committed"}})
        ddb.put_item(TableName="tenants", Item={"k": {"S": "t"}, "live": {"N": "1"}})
        with pytest.raises(ddb.exceptions.TransactionCanceledException):
            ddb.transact_write_items(TransactItems=[
                {"Put": {"TableName": "jobs", "Item": {"k": {"S": "phantom"}},
                         "ConditionExpression": "attribute_not_exists(k)"}},
                {"Update": {"TableName": "tenants", "Key": {"k": {"S": "t"}},
                            "UpdateExpression": "ADD live :one",
                            "ConditionExpression": "live < :cap",
                            "ExpressionAttributeValues": {":one": {"N": "1"},
                                                          ":cap": {"N": "1"}}}}])
        ddb.put_item(TableName="jobs", Item={"k": {"S": "after"}})
        # What GetRecords serves: the shard of the table as it stands after the rollback
        # (moto's own rollback puts back a copy of the table, its shard included).
        backend = models.dynamodb_backends["123456789012"]["us-east-1"]
        records = [r.record for r in backend.tables["jobs"].stream_shard.items]
        return [(r["eventName"], r["dynamodb"]["Keys"]["k"]["S"]) for r in records]


def test_a_cancelled_transaction_leaves_no_stream_record_as_moto_s_rollback_does() -> None:
    """Issue 44: the per-item undo put the rows back but left the records the cancelled
    transaction's put appended to the stream, so the relay published ``Job Queued`` for a
    job that never existed (a refused admission, retried under a new id)."""
    theirs = _stream_after_a_cancelled_admission()
    assert theirs == [("INSERT", "committed"), ("INSERT", "after")]
    dynamo_transactions.install()
    assert _stream_after_a_cancelled_admission() == theirs
