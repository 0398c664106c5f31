"""Remembered update-expression parses give the same items as fresh ones."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.parsing.expressions import UpdateExpressionParser

from leasehold.local import dynamo_parsing

UPDATES: list[dict[str, Any]] = [
    {"UpdateExpression": "SET #s = :s, n = if_not_exists(n, :zero) + :one, "
                         "h = list_append(if_not_exists(h, :empty), :entry)",
     "ExpressionAttributeNames": {"#s": "state"},
     "ExpressionAttributeValues": {":s": {"S": "RUNNING"}, ":zero": {"N": "0"},
                                   ":one": {"N": "1"}, ":empty": {"L": []},
                                   ":entry": {"L": [{"M": {"at": {"N": "1"}}}]}}},
    {"UpdateExpression": "SET #s = :s, n = if_not_exists(n, :zero) + :one, "
                         "h = list_append(if_not_exists(h, :empty), :entry)",
     "ExpressionAttributeNames": {"#s": "state"},
     "ExpressionAttributeValues": {":s": {"S": "DONE"}, ":zero": {"N": "0"},
                                   ":one": {"N": "5"}, ":empty": {"L": []},
                                   ":entry": {"L": [{"M": {"at": {"N": "2"}}}]}}},
    {"UpdateExpression": "ADD c :one REMOVE gone SET m.k = :v",
     "ExpressionAttributeValues": {":one": {"N": "1"}, ":v": {"S": "x"}}},
    {"UpdateExpression": "ADD c :one REMOVE gone SET m.k = :v",
     "ExpressionAttributeValues": {":one": {"N": "2"}, ":v": {"S": "y"}}},
]


def _run() -> list[dict[str, Any]]:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                         AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                         KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}])
        seen = []
        for key in ("a", "b"):  # the same expressions again, on another item
            ddb.put_item(TableName="t", Item={"k": {"S": key}, "gone": {"S": "1"},
                                              "m": {"M": {}}})
            for update in UPDATES:
                seen.append(ddb.update_item(TableName="t", Key={"k": {"S": key}},
                                            ReturnValues="ALL_NEW", **update)["Attributes"])
        return seen


def test_remembered_parses_update_items_as_fresh_ones_do(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = _run()
    monkeypatch.setattr(UpdateExpressionParser, "make", UpdateExpressionParser.make)
    monkeypatch.delattr(UpdateExpressionParser, "_leasehold_kept", raising=False)
    dynamo_parsing.install()
    text = UPDATES[0]["UpdateExpression"]
    assert UpdateExpressionParser.make(text) is UpdateExpressionParser.make(text)  # remembered
    assert _run() == fresh
    assert fresh[1]["n"] == {"N": "6"} and fresh[5]["n"] == {"N": "6"}
