"""Create the tables and queues from :mod:`leasehold.aws.definitions` (local runtime and tests).

On AWS the CDK stack creates the same resources from the same definitions.
"""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from leasehold.aws.clients import Clients
from leasehold.aws.definitions import TABLES, queues
from leasehold.settings import Settings

#: Long enough for a job to run between heartbeats; each heartbeat extends it again.
VISIBILITY_TIMEOUT_SECONDS = 300
#: How long provisioning waits for a table and its indexes to become ACTIVE (real DynamoDB
#: keeps a new table CREATING for seconds, a new index for minutes on a large table).
ACTIVE_TIMEOUT_SECONDS = 600.0


class ProvisionError(RuntimeError):
    """A table cannot be made ready (not ACTIVE in time, TTL on another attribute)."""


def create_tables(clients: Clients, settings: Settings, *, poll_seconds: float = 1.0,
                  timeout: float = ACTIVE_TIMEOUT_SECONDS) -> list[str]:
    """Create what is missing, wait until every table and index is ACTIVE, enable TTL.

    Idempotent: a second run (``leasehold dev --provision`` again, on an endpoint that kept
    its tables) changes nothing. Two things made it fail on AWS's own DynamoDB (and DynamoDB
    Local), which moto lets through: a table was used while still CREATING, and TTL was
    enabled again on a table that had it (``ValidationException: TimeToLive is already
    enabled``).
    """
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
    for table in TABLES:
        name = table.table_name(settings)
        wait_active(clients, name, poll_seconds=poll_seconds, timeout=timeout)
        if table.ttl_attribute:
            enable_ttl(clients, name, table.ttl_attribute)
    return created


def wait_active(clients: Clients, name: str, *, poll_seconds: float = 1.0,
                timeout: float = ACTIVE_TIMEOUT_SECONDS) -> None:
    """Return once table ``name`` and each of its global secondary indexes are ACTIVE."""
    ddb = clients.dynamodb
    # The waiter waits for TableStatus ACTIVE (and a table that exists at all); its delay
    # is whole seconds (0 in tests, whose tables are ACTIVE after a few descriptions).
    delay = int(poll_seconds)
    ddb.get_waiter("table_exists").wait(TableName=name, WaiterConfig={
        "Delay": delay, "MaxAttempts": max(1, int(timeout / max(delay, 1)))})
    deadline = time.monotonic() + timeout
    while True:
        described = ddb.describe_table(TableName=name)["Table"]
        pending = [index["IndexName"] for index in described.get("GlobalSecondaryIndexes", [])
                   if index.get("IndexStatus", "ACTIVE") != "ACTIVE"]
        if described["TableStatus"] == "ACTIVE" and not pending:
            return
        if time.monotonic() > deadline:
            raise ProvisionError(f"table {name} is {described['TableStatus']}"
                                   + (f", index(es) {', '.join(pending)} not ACTIVE"
                                      if pending else "") + f" after {timeout:.0f} s")
        time.sleep(poll_seconds)


def enable_ttl(clients: Clients, name: str, attribute: str) -> None:
    """Enable TTL on ``attribute`` unless it already is (AWS refuses to enable it twice)."""
    ddb = clients.dynamodb
    current = ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
    status = current.get("TimeToLiveStatus", "DISABLED")
    if status in ("ENABLED", "ENABLING"):
        if current.get("AttributeName") != attribute:
            raise ProvisionError(
                f"table {name} has TTL on {current.get('AttributeName')!r}, not {attribute!r}")
        return
    ddb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": attribute})


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


def missing_credentials() -> str | None:
    """What is missing for boto3 to sign a request, or None. Any values do for an emulator."""
    hint = ("AWS credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, any values "
            "for an emulator, or AWS_PROFILE)")
    try:
        found = boto3.session.Session().get_credentials()
    except BotoCoreError as exc:  # a configured provider that fails (a profile, a role)
        return f"{hint}: {exc}"
    return hint if found is None else None


def missing(clients: Clients, settings: Settings) -> list[str]:
    """The tables and queues of :mod:`leasehold.aws.definitions` that do not exist."""
    absent = []
    for table in TABLES:
        name = table.table_name(settings)
        try:
            clients.dynamodb.describe_table(TableName=name)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceNotFoundException":
                raise
            absent.append(f"table {name}")
    for queue in queues(settings):
        for name in (queue.name(settings), queue.dlq_name(settings)):
            try:
                clients.sqs.get_queue_url(QueueName=name)
            except ClientError as exc:
                if "NonExistentQueue" not in exc.response["Error"]["Code"] and \
                        exc.response["Error"]["Code"] != "QueueDoesNotExist":
                    raise
                absent.append(f"queue {name}")
    return absent


class NotProvisioned(RuntimeError):
    """The endpoint lacks what Leasehold needs; the message names each missing piece."""


def check_ready(clients: Clients, settings: Settings, *, endpoint: str) -> None:
    """Raise :class:`NotProvisioned` naming the credentials, tables and queues that are missing.

    Without this check, every API request against a fresh emulator (or an account without
    the stack) answered 500.
    """
    credentials = missing_credentials()
    if credentials is not None:
        raise NotProvisioned(f"no {credentials}")
    try:
        absent = missing(clients, settings)
    except (ClientError, BotoCoreError) as exc:
        raise NotProvisioned(f"cannot inspect {endpoint}: {exc}") from exc
    if absent:
        raise NotProvisioned(
            f"{endpoint} lacks {len(absent)} resource(s): {', '.join(absent)}. "
            "Run with --provision to create them (or deploy the stack).")
