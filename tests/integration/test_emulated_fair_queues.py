"""The embedded emulator serves standard queues as SQS fair queues (moto alone does not)."""

from __future__ import annotations

from typing import Any

import boto3


def sqs(endpoint: str) -> Any:
    return boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",  # type: ignore[call-overload]
                        aws_access_key_id="x", aws_secret_access_key="x")


def send(client: Any, url: str, body: str, group: str | None) -> None:
    client.send_message(QueueUrl=url, MessageBody=body,
                        **({"MessageGroupId": group} if group else {}))


def receive(client: Any, url: str, count: int) -> list[str]:
    messages = client.receive_message(QueueUrl=url, MaxNumberOfMessages=count,
                                      VisibilityTimeout=60).get("Messages", [])
    return [m["Body"] for m in messages]


def test_a_quiet_group_is_served_before_a_flooding_groups_backlog(endpoint: str) -> None:
    client = sqs(endpoint)
    url = client.create_queue(QueueName="fair-flood")["QueueUrl"]
    for i in range(40):
        send(client, url, f"a{i}", "A")
    assert receive(client, url, 10) == [f"a{i}" for i in range(10)]  # only A waits: in order
    # A now has 10 in flight and 30 waiting; B's one message arrives last.
    send(client, url, "b0", "B")
    assert receive(client, url, 1) == ["b0"]
    # With B drained, A's backlog comes in send order.
    assert receive(client, url, 10) == [f"a{i}" for i in range(10, 20)]


def test_groups_take_turns_by_in_flight_counts(endpoint: str) -> None:
    client = sqs(endpoint)
    url = client.create_queue(QueueName="fair-turns")["QueueUrl"]
    for i in range(6):
        send(client, url, f"a{i}", "A")
    for i in range(3):
        send(client, url, f"b{i}", "B")
    # Nothing in flight: the oldest goes first, then whichever group has fewer taken.
    assert receive(client, url, 6) == ["a0", "b0", "a1", "b1", "a2", "b2"]
    assert receive(client, url, 10) == ["a3", "a4", "a5"]


def test_without_groups_the_order_is_unchanged(endpoint: str) -> None:
    client = sqs(endpoint)
    url = client.create_queue(QueueName="fair-plain")["QueueUrl"]
    for i in range(15):
        send(client, url, f"m{i}", None)
    assert receive(client, url, 10) + receive(client, url, 10) == [f"m{i}" for i in range(15)]


def test_deleting_a_message_ends_its_flight(endpoint: str) -> None:
    client = sqs(endpoint)
    url = client.create_queue(QueueName="fair-deleted")["QueueUrl"]
    for i in range(4):
        send(client, url, f"a{i}", "A")
    send(client, url, "b0", "B")
    send(client, url, "b1", "B")
    first = client.receive_message(QueueUrl=url, MaxNumberOfMessages=2,
                                   VisibilityTimeout=60)["Messages"]
    assert [m["Body"] for m in first] == ["a0", "b0"]
    client.delete_message(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"])
    # A: 0 in flight (a0 deleted), B: 1 (b0) -> A's next first.
    assert receive(client, url, 1) == ["a1"]


def test_fifo_queues_keep_their_own_order(endpoint: str) -> None:
    client = sqs(endpoint)
    url = client.create_queue(QueueName="fair-fifo.fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    for body, group in (("a0", "A"), ("a1", "A"), ("a2", "A"), ("b0", "B")):
        send(client, url, body, group)
    assert receive(client, url, 10) == ["a0", "a1", "a2", "b0"]
