"""``make bench-cost`` reads write and read units from DynamoDB's own answers
(``bench.consumed``), against AWS's DynamoDB Local: a transaction's list is summed, each of its
items billed twice; an index write is counted apart; a refused write is counted as refused."""

from __future__ import annotations

import contextlib

import pytest
from botocore.exceptions import ClientError

from bench.consumed import CapacityHook
from leasehold.aws.definitions import job_key
from leasehold.lifecycle.app import Leasehold


@pytest.mark.parametrize("backend", ["ddblocal"], indirect=True)
def test_capacity_units_come_from_dynamodbs_answers(app: Leasehold) -> None:
    hook = CapacityHook().attach(app.clients)
    ddb, table = app.clients.dynamodb, app.settings.tenants_table
    ddb.put_item(TableName=table, Item={"tenant": {"S": "a"}})
    assert hook.snapshot().write_units == 1.0
    ddb.put_item(TableName=table, Item={"tenant": {"S": "big"}, "x": {"S": "x" * 1500}})
    assert hook.snapshot().write_units == 3.0  # 1.5 KB: two units
    ddb.transact_write_items(TransactItems=[
        {"Put": {"TableName": table, "Item": {"tenant": {"S": "b"}}}},
        {"Update": {"TableName": table, "Key": {"tenant": {"S": "c"}},
                    "UpdateExpression": "ADD live :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}}}}])
    assert hook.snapshot().write_units == 7.0  # two items, each billed twice
    ddb.transact_write_items(TransactItems=[  # two of one size: DynamoDB Local says 2
        {"Put": {"TableName": table, "Item": {"tenant": {"S": "d"}}}},
        {"Put": {"TableName": table, "Item": {"tenant": {"S": "e"}}}}])
    assert hook.snapshot().write_units == 11.0
    with contextlib.suppress(ClientError):
        ddb.put_item(TableName=table, Item={"tenant": {"S": "a"}},
                     ConditionExpression="attribute_not_exists(tenant)")
    assert hook.snapshot().refused_writes == 1
    ddb.get_item(TableName=table, Key={"tenant": {"S": "a"}}, ConsistentRead=True)
    assert hook.snapshot().read_units == 1.0
    # A job row's put writes its indexes too, each counted under its name.
    jobs = app.settings.jobs_table
    ddb.put_item(TableName=jobs, Item={**job_key("j1"), "tenant_shard": {"S": "a#0"},
                                       "created_at": {"N": "1"}})
    assert any("/" in target for target in hook.snapshot().by_target), hook.snapshot()
