"""What one request costs a substrate, by operation: the serial round trip of each request a
job makes, on a substrate nothing else is using (issue 21: why Leasehold's front door reaches
half Celery's rate on the embedded emulator and nearly all of it on DynamoDB Local).

Each operation is timed ``calls`` times in a row from one client on fresh tables, with items
shaped like Leasehold's (a job row with a short history; a tenant item) and like Celery's
(a result put and read). The per-job estimate is the sum over a run's requests per job of
their measured cost: what the substrate spends serving one job, whoever asks.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import boto3

_HISTORY = {"L": [{"M": {"at": {"N": "1"}, "source": {"S": "QUEUED"},
                         "target": {"S": "RUNNING"}}}] * 3}


def _row(key: str) -> dict[str, Any]:
    return {"k": {"S": key}, "state": {"S": "QUEUED"}, "epoch": {"N": "1"},
            "payload": {"S": "x" * 50}, "history": _HISTORY}


def measure(endpoint: str, *, calls: int = 200) -> dict[str, float]:
    """Milliseconds per call of each ``service Operation`` a job's requests use."""
    options = {"endpoint_url": endpoint, "region_name": "us-east-1",
               "aws_access_key_id": "bench", "aws_secret_access_key": "bench"}
    ddb, sqs = boto3.client("dynamodb", **options), boto3.client("sqs", **options)
    prefix = "cost" + uuid.uuid4().hex[:8]
    jobs, tenants = f"{prefix}-jobs", f"{prefix}-tenants"
    for table in (jobs, tenants):
        ddb.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
                         KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                         AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}])
    url = sqs.create_queue(QueueName=prefix)["QueueUrl"]
    keys = [uuid.uuid4().hex for _ in range(calls)]
    more = [uuid.uuid4().hex for _ in range(calls)]
    state = {"#s": "state"}

    def slot(i: int, amount: int) -> dict[str, Any]:
        return {"Update": {"TableName": tenants, "Key": {"k": {"S": f"t{i % 8}"}},
                           "UpdateExpression": "ADD live :n",
                           "ExpressionAttributeValues": {":n": {"N": str(amount)}}}}

    handles: list[str] = []

    def receive(_: int) -> None:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        handles.extend(m["ReceiptHandle"] for m in got)

    def delete(_: int) -> None:
        if handles:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=handles.pop())

    steps: Mapping[str, Callable[[int], Any]] = {
        "dynamodb PutItem": lambda i: ddb.put_item(
            TableName=jobs, Item=_row(keys[i]), ConditionExpression="attribute_not_exists(k)"),
        "dynamodb GetItem": lambda i: ddb.get_item(
            TableName=jobs, Key={"k": {"S": keys[i]}}, ConsistentRead=True),
        "dynamodb UpdateItem": lambda i: ddb.update_item(
            TableName=jobs, Key={"k": {"S": keys[i]}}, ReturnValues="ALL_NEW",
            UpdateExpression="SET #s = :r, history = list_append(history, :h)",
            ConditionExpression="#s = :q AND epoch = :e", ExpressionAttributeNames=state,
            ExpressionAttributeValues={":r": {"S": "RUNNING"}, ":q": {"S": "QUEUED"},
                                       ":e": {"N": "1"}, ":h": _HISTORY}),
        "dynamodb TransactWriteItems": lambda i: ddb.transact_write_items(TransactItems=[
            {"Put": {"TableName": jobs, "Item": _row(more[i]),
                     "ConditionExpression": "attribute_not_exists(k)"}}, slot(i, 1)]),
        "sqs SendMessage": lambda i: sqs.send_message(QueueUrl=url, MessageBody="{}"),
        "sqs ReceiveMessage": receive,
        "sqs DeleteMessage": delete,
    }
    costs = {}
    for operation, step in steps.items():
        started = time.perf_counter()
        for i in range(calls):
            step(i)
        costs[operation] = round((time.perf_counter() - started) / calls * 1000, 3)
    return costs


def per_job(costs: Mapping[str, float], requests_per_job: Mapping[str, float]) -> float:
    """Milliseconds of the substrate's time per job: each operation's requests per job at
    its measured cost (an operation not timed counts at the mean of those that were;
    ``...Batch`` forms at their single form's)."""
    mean = sum(costs.values()) / len(costs)
    total = 0.0
    for operation, count in requests_per_job.items():
        single = operation.removesuffix("Batch")
        total += count * costs.get(operation, costs.get(single, mean))
    return round(total, 2)
