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


def test_a_cancelled_transaction_leaves_every_item_as_moto_s_rollback_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    theirs, copied = _scenario()
    assert copied  # moto's rollback puts a whole copy of the table back
    monkeypatch.setattr(models, "copy", models.copy)
    monkeypatch.setattr(models.DynamoDBBackend, "transact_write_items",
                        models.DynamoDBBackend.transact_write_items)
    monkeypatch.delattr(models.DynamoDBBackend, "_leasehold_item_undo", raising=False)
    dynamo_transactions.install()
    ours, copied = _scenario()
    assert not copied  # the same table, its items put back
    assert ours == theirs
    assert [i["k"]["S"] for i in ours[:3]] == ["a", "b", "gone"]
    assert ours[0]["n"] == {"N": "2"} and ours[3]["n"] == {"N": "1"}
