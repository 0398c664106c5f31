"""Create the tables and queues from :mod:`leasehold.aws.definitions` (local runtime and tests).

On AWS the CDK stack creates the same resources from the same definitions.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.clients import Clients
from leasehold.aws.definitions import TABLES, queues
from leasehold.settings import Settings

#: Long enough for a job to run between heartbeats; each heartbeat extends it again.
VISIBILITY_TIMEOUT_SECONDS = 300


def create_tables(clients: Clients, settings: Settings) -> list[str]:
    created = []
    ddb = clients.dynamodb
    for table in TABLES:
        kwargs = table.create_table_kwargs(settings)
        try:
            ddb.create_table(**kwargs)
            created.append(kwargs["TableName"])
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceInUseException":
                raise
        if table.ttl_attribute:
            ddb.update_time_to_live(
                TableName=kwargs["TableName"],
                TimeToLiveSpecification={"Enabled": True, "AttributeName": table.ttl_attribute},
            )
    return created


def create_queues(clients: Clients, settings: Settings) -> dict[str, str]:
    sqs = clients.sqs
    urls: dict[str, str] = {}
    for queue in queues(settings):
        dlq_url = sqs.create_queue(
            QueueName=queue.dlq_name(settings),
            Attributes={"MessageRetentionPeriod": str(queue.dlq_retention_seconds)},
        )["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
            "Attributes"]["QueueArn"]
        attributes: Any = {
            "VisibilityTimeout": str(VISIBILITY_TIMEOUT_SECONDS),
            "MessageRetentionPeriod": str(queue.retention_seconds),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": queue.max_receive_count}),
        }
        url = sqs.create_queue(QueueName=queue.name(settings), Attributes=attributes)["QueueUrl"]
        urls[queue.name(settings)] = url
        urls[queue.dlq_name(settings)] = dlq_url
    return urls


def create_all(clients: Clients, settings: Settings) -> dict[str, str]:
    create_tables(clients, settings)
    return create_queues(clients, settings)
