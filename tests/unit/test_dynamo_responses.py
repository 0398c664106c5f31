"""The emulator's direct DynamoDB answers equal moto's serializer's, operation by operation."""

from __future__ import annotations

import base64
import json
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.responses import DynamoHandler
from moto.server import ThreadedMotoServer

from leasehold.local import dynamo_responses


def moto_serializer(handler_type: type) -> Any:
    """The handler's own ``serialized`` (moto's), under any direct answers installed."""
    return getattr(handler_type, "_leasehold_generic", handler_type.serialized)  # type: ignore[attr-defined]


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Install the direct answers, answering every call both ways and comparing them;
    returns the operations that were answered directly."""
    # moto's own serializer underneath, even where the suite installed the direct answers
    # already (tests/conftest.py): the comparison is against moto, never against itself.
    monkeypatch.setattr(DynamoHandler, "serialized", moto_serializer(DynamoHandler))
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


def test_a_change_stream_page_answers_as_moto_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """``GetRecords`` (whole row images, binary values, the record's creation time) written
    directly is the JSON moto's serializer writes, and what boto3 reads back is the same."""
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    monkeypatch.setattr(DynamoDBStreamsHandler, "serialized",
                        moto_serializer(DynamoDBStreamsHandler))
    monkeypatch.delattr(DynamoDBStreamsHandler, "_leasehold_direct", raising=False)
    dynamo_responses.install_streams()
    direct = DynamoDBStreamsHandler.serialized
    generic = DynamoDBStreamsHandler._leasehold_generic
    pages: list[dict[str, Any]] = []

    def both(self: Any, action_result: Any) -> Any:
        status, headers, body = direct(self, action_result)
        if self._get_action() == "GetRecords":
            g_status, g_headers, g_body = generic(self, action_result)
            assert (status, json.loads(body)) == (g_status, json.loads(g_body))
            assert headers["Content-Type"] == g_headers["Content-Type"]
            pages.append(json.loads(body))
        return status, headers, body

    monkeypatch.setattr(DynamoDBStreamsHandler, "serialized", both)
    # moto's in-process mock does not route DynamoDB Streams; its server does, in this process.
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{server.get_host_and_port()[1]}"
    clients = {"region_name": "us-east-1", "endpoint_url": endpoint,
               "aws_access_key_id": "k", "aws_secret_access_key": "s"}
    try:
        ddb = boto3.client("dynamodb", **clients)
        stream = ddb.create_table(
            TableName="t", BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
            StreamSpecification={"StreamEnabled": True,
                                 "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )["TableDescription"]["LatestStreamArn"]
        item = {"k": {"S": "a"}, "b": {"B": b"\x00\xff"}, "bs": {"BS": [b"x"]},
                "l": {"L": [{"M": {"at": {"N": "7"}}}, {"NULL": True}]}}
        ddb.put_item(TableName="t", Item=item)
        ddb.update_item(TableName="t", Key={"k": {"S": "a"}}, UpdateExpression="SET n = :n",
                        ExpressionAttributeValues={":n": {"N": "2"}})
        ddb.delete_item(TableName="t", Key={"k": {"S": "a"}})
        streams = boto3.client("dynamodbstreams", **clients)
        shard = streams.describe_stream(StreamArn=stream)["StreamDescription"]["Shards"][0]
        iterator = streams.get_shard_iterator(StreamArn=stream, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        page = streams.get_records(ShardIterator=iterator)
        records = page["Records"]
        assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "REMOVE"]
        assert records[0]["dynamodb"]["NewImage"] == item
        assert records[2]["dynamodb"]["OldImage"]["n"] == {"N": "2"}
        assert records[0]["dynamodb"]["ApproximateCreationDateTime"].year >= 2024
        assert streams.get_records(ShardIterator=page["NextShardIterator"])["Records"] == []
    finally:
        server.stop()
    assert len(pages) == 2
