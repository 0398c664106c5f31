"""Provisioning is idempotent and waits for ACTIVE tables, as AWS's own DynamoDB needs.

Both defects were found by running on DynamoDB Local (issue 19); moto hid them: it accepts a
second ``UpdateTimeToLive(Enabled=True)`` and makes every table ACTIVE at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from leasehold.aws.clients import Clients
from leasehold.aws.definitions import TABLES
from leasehold.aws.provision import create_all, create_tables, missing
from leasehold.settings import Settings

pytestmark = pytest.mark.ddblocal


def _settings() -> Settings:
    prefix = "p" + uuid.uuid4().hex[:8]
    return Settings(jobs_table=f"{prefix}-jobs", schedules_table=f"{prefix}-schedules",
                    tenants_table=f"{prefix}-tenants", coordination_table=f"{prefix}-coord",
                    workflows_table=f"{prefix}-workflows", queue_prefix=prefix,
                    pools=("default",))


def test_provisioning_twice_succeeds_and_keeps_ttl_enabled(aws: None) -> None:
    settings = _settings()
    clients = Clients(settings)
    create_all(clients, settings)
    # Before: DynamoDB Local (and AWS) answered the second run with "ValidationException:
    # TimeToLive is already enabled" (`leasehold dev --provision` crashed on its second start).
    assert create_tables(clients, settings) == []
    create_all(clients, settings)
    assert missing(clients, settings) == []
    for table in TABLES:
        if table.ttl_attribute:
            ttl = clients.dynamodb.describe_time_to_live(
                TableName=table.table_name(settings))["TimeToLiveDescription"]
            assert ttl["TimeToLiveStatus"] == "ENABLED"
            assert ttl["AttributeName"] == table.ttl_attribute


def _creating_for(calls: int) -> tuple[
        Callable[..., None], Callable[..., None], list[tuple[str, str, str]]]:
    """An ``after-call`` hook: each table reads CREATING (indexes too) for its first
    ``calls`` descriptions, as real DynamoDB answers while it builds them; and a log of
    (operation, table, status the caller last saw)."""
    seen: dict[str, int] = {}
    status: dict[str, str] = {}
    log: list[tuple[str, str, str]] = []

    def remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["table_name"] = params.get("TableName", "")

    def hook(parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        name = context.get("table_name", "")
        if model.name == "DescribeTable":
            seen[name] = seen.get(name, 0) + 1
            if seen[name] <= calls:
                parsed["Table"]["TableStatus"] = "CREATING" if seen[name] < calls else "ACTIVE"
                for index in parsed["Table"].get("GlobalSecondaryIndexes", []):
                    index["IndexStatus"] = "CREATING"
            table = parsed["Table"]
            ready = table["TableStatus"] == "ACTIVE" and all(
                index["IndexStatus"] == "ACTIVE"
                for index in table.get("GlobalSecondaryIndexes", []))
            status[name] = "ready" if ready else "building"
        log.append((model.name, name, status.get(name, "unknown")))

    return remember, hook, log


def test_provisioning_returns_only_when_every_table_and_index_is_active(aws: None) -> None:
    settings = _settings()
    clients = Clients(settings)
    remember, hook, log = _creating_for(calls=3)
    clients.dynamodb.meta.events.register("provide-client-params.dynamodb", remember)
    clients.dynamodb.meta.events.register("after-call.dynamodb", hook)
    create_tables(clients, settings, poll_seconds=0.01)
    for table in TABLES:
        name = table.table_name(settings)
        calls = [(operation, status) for operation, table_name, status in log
                 if table_name == name]
        # The table was described until it and its indexes read ACTIVE ...
        assert ("DescribeTable", "ready") in calls, calls
        # ... and nothing but creating and describing it happened before that.
        first_ready = calls.index(("DescribeTable", "ready"))
        assert {operation for operation, _ in calls[:first_ready]} <= {
            "CreateTable", "DescribeTable"}, calls
