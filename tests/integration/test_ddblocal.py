"""The second backend itself: reachable from this machine only, and where it differs from moto.

Each difference checked here is a row of the fidelity table in docs/design.md.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from leasehold.aws.faults import Fault, FaultInjector
from tests import ddblocal

pytestmark = pytest.mark.ddblocal

LISTEN = "0A"  # TCP state in /proc/net/tcp*


def _listening(table: Path) -> list[tuple[str, int]]:
    """(hex local address, port) of each listening socket in a /proc/<pid>/net/tcp* file."""
    found = []
    for line in table.read_text().splitlines()[1:]:
        fields = line.split()
        address, port = fields[1].split(":")
        if fields[3] == LISTEN:
            found.append((address, int(port, 16)))
    return found


def test_dynamodb_local_listens_only_inside_a_namespace_whose_one_interface_is_loopback(
        dynamodb_local: str) -> None:
    server = ddblocal.shared()
    jvm = server.java_pid()
    # The JVM is in a network namespace of its own ...
    assert os.readlink(f"/proc/{jvm}/ns/net") != os.readlink("/proc/self/ns/net")
    # ... whose only interface is its loopback: no address outside the machine routes there,
    interfaces = [line.split(":")[0].strip()
                  for line in Path(f"/proc/{jvm}/net/dev").read_text().splitlines()[2:]]
    assert interfaces == ["lo"]
    # ... where it does listen on every address (it has no bind option).
    inner = _listening(Path(f"/proc/{jvm}/net/tcp6")) + _listening(Path(f"/proc/{jvm}/net/tcp"))
    assert any(port == ddblocal.INNER_PORT for _, port in inner), inner
    # In this namespace the only way in is the relay, bound to 127.0.0.1 alone.
    ours = [(address, port) for address, port in
            _listening(Path("/proc/self/net/tcp")) + _listening(Path("/proc/self/net/tcp6"))
            if port == server.port]
    assert ours == [("0100007F", server.port)]
    assert dynamodb_local == f"http://127.0.0.1:{server.port}"


@pytest.fixture
def table(backend: str, aws: None) -> Any:
    if backend not in ("moto", "ddblocal"):
        pytest.skip("pins moto's and DynamoDB Local's own answers, not another endpoint's")
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    name = "c" + uuid.uuid4().hex[:8]
    ddb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                           {"AttributeName": "g", "AttributeType": "S"}],
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     GlobalSecondaryIndexes=[{
                         "IndexName": "by_g", "KeySchema": [{"AttributeName": "g",
                                                             "KeyType": "HASH"}],
                         "Projection": {"ProjectionType": "KEYS_ONLY"}}])
    return ddb, name


def _put(name: str, value: str) -> list[dict[str, Any]]:
    return [{"Put": {"TableName": name, "Item": {"pk": {"S": "job"}, "v": {"S": value}},
                     "ConditionExpression": "attribute_not_exists(pk)"}}]


def test_a_transaction_sent_again_with_its_token(backend: str, table: Any) -> None:
    """botocore reuses one ClientRequestToken across its retries of a TransactWriteItems.

    AWS and DynamoDB Local answer the retry of a transaction that landed with success (and
    the same token with other parameters with IdempotentParameterMismatchException); moto
    ignores the token, so the retry fails its condition. The failure model's lost-response
    tests run on both, so our recognition of our own write is tested under each.
    """
    ddb, name = table
    token = uuid.uuid4().hex
    ddb.transact_write_items(TransactItems=_put(name, "a"), ClientRequestToken=token)
    if backend == "ddblocal":
        ddb.transact_write_items(TransactItems=_put(name, "a"), ClientRequestToken=token)
        with pytest.raises(ClientError) as refused:
            ddb.transact_write_items(TransactItems=_put(name, "b"), ClientRequestToken=token)
        assert refused.value.response["Error"]["Code"] == "IdempotentParameterMismatchException"
    else:
        with pytest.raises(ClientError) as refused:
            ddb.transact_write_items(TransactItems=_put(name, "a"), ClientRequestToken=token)
        assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"


def _two_actions_on_one_item(name: str) -> dict[str, Any]:
    key = {"pk": {"S": "same"}}
    return {"TransactItems": [
        {"Put": {"TableName": name, "Item": key}},
        {"ConditionCheck": {"TableName": name, "Key": key,
                            "ConditionExpression": "attribute_not_exists(pk)"}}]}


def _reserved_word(name: str) -> dict[str, Any]:
    return {"TransactItems": [{"Update": {
        "TableName": name, "Key": {"pk": {"S": "r"}},
        "UpdateExpression": "SET status = :s", "ExpressionAttributeValues": {":s": {"S": "x"}}}}]}


def _too_many_items(name: str) -> dict[str, Any]:
    return {"TransactItems": [{"Put": {"TableName": name, "Item": {"pk": {"S": str(i)}}}}
                              for i in range(101)]}


def _item_over_400_kb(name: str) -> dict[str, Any]:
    return {"TransactItems": [{"Put": {"TableName": name, "Item": {
        "pk": {"S": "big"}, "v": {"S": "x" * 410_000}}}}]}


def _a_39_digit_number(name: str) -> dict[str, Any]:
    return {"TransactItems": [{"Put": {"TableName": name, "Item": {
        "pk": {"S": "n"}, "v": {"N": "1" * 39}}}}]}


def _consistent_read_on_a_gsi(name: str) -> dict[str, Any]:
    return {"query": {"TableName": name, "IndexName": "by_g", "ConsistentRead": True,
                      "KeyConditionExpression": "g = :g",
                      "ExpressionAttributeValues": {":g": {"S": "x"}}}}


def _an_empty_gsi_key(name: str) -> dict[str, Any]:
    return {"put_item": {"TableName": name, "Item": {"pk": {"S": "e"}, "g": {"S": ""}}}}


def _a_gsi_key_of_the_wrong_type(name: str) -> dict[str, Any]:
    return {"put_item": {"TableName": name, "Item": {"pk": {"S": "w"}, "g": {"N": "1"}}}}


#: What each backend answers (None: accepted). AWS answers ValidationException to all.
ANSWERS = {
    # DynamoDB Local runs both actions and cancels on the condition (AWS and moto refuse).
    _two_actions_on_one_item: {"moto": "ValidationException",
                               "ddblocal": "TransactionCanceledException"},
    _reserved_word: {"moto": "ValidationException", "ddblocal": "ValidationException"},
    _too_many_items: {"moto": "ValidationException", "ddblocal": "ValidationException"},
    _item_over_400_kb: {"moto": "ValidationException", "ddblocal": "ValidationException"},
    # moto stores a number AWS cannot hold.
    _a_39_digit_number: {"moto": None, "ddblocal": "ValidationException"},
    _consistent_read_on_a_gsi: {"moto": "ValidationException", "ddblocal": "ValidationException"},
    _an_empty_gsi_key: {"moto": "ValidationException", "ddblocal": "ValidationException"},
    # moto indexes an item whose index key has another type than the index declares.
    _a_gsi_key_of_the_wrong_type: {"moto": None, "ddblocal": "ValidationException"},
}


@pytest.mark.parametrize("request_for", list(ANSWERS), ids=lambda f: f.__name__.strip("_"))
def test_what_aws_refuses_each_backend_refuses_or_lets_through(
        backend: str, table: Any, request_for: Any) -> None:
    """Validation AWS does, and which backend does it (docs/design.md, fidelity table)."""
    ddb, name = table
    expected = ANSWERS[request_for][backend]
    request = request_for(name)
    operation, params = (next(iter(request.items())) if "TransactItems" not in request
                         else ("transact_write_items", request))
    if expected is None:
        getattr(ddb, operation)(**params)
        return
    with pytest.raises(ClientError) as refused:
        getattr(ddb, operation)(**params)
    assert refused.value.response["Error"]["Code"] == expected


def test_a_lost_response_on_a_transaction_is_retried_under_its_token(
        backend: str, table: Any) -> None:
    """The ``lose`` fault (the write lands, botocore retries) against each backend.

    botocore generates the ClientRequestToken once per call and sends it again on each of
    its retries, so on DynamoDB Local (as on AWS) the retry is deduplicated and the caller
    sees success; on moto it fails the condition its first try made true, which is the case
    the store's recognition of its own write handles.
    """
    ddb, name = table
    injector = FaultInjector([Fault(target="dynamodb.TransactWriteItems", kind="lose")])
    injector.install(ddb)
    if backend == "ddblocal":
        ddb.transact_write_items(TransactItems=_put(name, "a"))
    else:
        with pytest.raises(ClientError) as refused:
            ddb.transact_write_items(TransactItems=_put(name, "a"))
        assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert injector.injected[("dynamodb.TransactWriteItems", "lose")] == 1
    item = ddb.get_item(TableName=name, Key={"pk": {"S": "job"}}, ConsistentRead=True)["Item"]
    assert item["v"] == {"S": "a"}
