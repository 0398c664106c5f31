"""The emulator's direct DynamoDB answers equal moto's serializer's, operation by operation."""

from __future__ import annotations

import base64
import json
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.responses import DynamoHandler

from leasehold.local import dynamo_responses


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Install the direct answers, answering every call both ways and comparing them;
    returns the operations that were answered directly."""
    monkeypatch.setattr(DynamoHandler, "serialized", DynamoHandler.serialized)
    monkeypatch.delattr(DynamoHandler, "_leasehold_direct", raising=False)
    dynamo_responses.install()
    direct = DynamoHandler.serialized
    generic = DynamoHandler._leasehold_generic
    answered: list[str] = []
    written: list[Any] = []

    class Spy:  # sees which answers were written directly
        @staticmethod
        def dumps(value: Any, **options: Any) -> str:
            written.append(value)
            return json.dumps(value, **options)

    monkeypatch.setattr(dynamo_responses, "json", Spy)

    def both(self: Any, action_result: Any) -> Any:
        written.clear()
        status, headers, body = direct(self, action_result)
        if not written:
            return status, headers, body
        g_status, g_headers, g_body = generic(self, action_result)
        assert (status, json.loads(body)) == (g_status, json.loads(g_body)), self._get_action()
        assert headers["Content-Type"] == g_headers["Content-Type"]
        answered.append(self._get_action())
        return status, headers, body

    monkeypatch.setattr(DynamoHandler, "serialized", both)
    return answered


def test_item_operations_answer_as_moto_does(compared: list[str]) -> None:
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(
            TableName="t", BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"},
                                  {"AttributeName": "g", "AttributeType": "N"}],
            KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
            GlobalSecondaryIndexes=[{"IndexName": "gidx", "KeySchema": [
                {"AttributeName": "g", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "ALL"}}])
        item = {"k": {"S": "a"}, "g": {"N": "1"}, "n": {"N": "1.50"}, "b": {"B": b"\x00\xff"},
                "bs": {"BS": [b"x", b"y"]}, "ss": {"SS": ["p", "q"]}, "ns": {"NS": ["1", "2"]},
                "nul": {"NULL": True}, "yes": {"BOOL": False}, "uni": {"S": "ü\u2028\"x\""},
                "l": {"L": [{"M": {"at": {"N": "7"}, "who": {"S": "w"}}}, {"S": "z"}]}}
        ddb.put_item(TableName="t", Item=item, ReturnConsumedCapacity="TOTAL")
        got = ddb.get_item(TableName="t", Key={"k": {"S": "a"}})["Item"]
        assert got["b"] == {"B": b"\x00\xff"} and got["l"] == item["l"]
        updated = ddb.update_item(
            TableName="t", Key={"k": {"S": "a"}}, ReturnValues="ALL_NEW",
            UpdateExpression="SET l = list_append(l, :e), c = :c REMOVE nul",
            ConditionExpression="g = :one", ExpressionAttributeValues={
                ":e": {"L": [{"S": "more"}]}, ":c": {"B": base64.b64decode("AAE=")},
                ":one": {"N": "1"}})["Attributes"]
        assert updated["c"] == {"B": b"\x00\x01"} and "nul" not in updated
        ddb.update_item(TableName="t", Key={"k": {"S": "a"}}, ReturnValues="UPDATED_OLD",
                        UpdateExpression="ADD g :one", ExpressionAttributeValues={
                            ":one": {"N": "1"}})
        assert ddb.query(TableName="t", IndexName="gidx", KeyConditionExpression="g = :two",
                         ExpressionAttributeValues={":two": {"N": "2"}})["Count"] == 1
        assert ddb.scan(TableName="t", Limit=1)["Count"] == 1
        ddb.batch_write_item(RequestItems={"t": [{"PutRequest": {"Item": {
            "k": {"S": "b"}, "g": {"N": "3"}}}}]})
        batch = ddb.batch_get_item(RequestItems={"t": {"Keys": [
            {"k": {"S": "a"}}, {"k": {"S": "b"}}]}})["Responses"]["t"]
        assert len(batch) == 2
        ddb.transact_write_items(TransactItems=[{"Put": {"TableName": "t", "Item": {
            "k": {"S": "c"}, "g": {"N": "4"}}}}])
        assert len(ddb.transact_get_items(TransactItems=[{"Get": {
            "TableName": "t", "Key": {"k": {"S": "c"}}}}])["Responses"]) == 1
        with pytest.raises(ddb.exceptions.ConditionalCheckFailedException) as refused:
            ddb.put_item(TableName="t", Item={"k": {"S": "a"}},
                         ConditionExpression="attribute_not_exists(k)",
                         ReturnValuesOnConditionCheckFailure="ALL_OLD")
        assert refused.value.response["Item"]["b"] == {"B": b"\x00\xff"}
        ddb.delete_item(TableName="t", Key={"k": {"S": "b"}}, ReturnValues="ALL_OLD")
    assert set(compared) == dynamo_responses.ITEM_OPERATIONS
