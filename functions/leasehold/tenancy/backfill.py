"""Upgrading a table written before the tenant index was sharded: rows without
``tenant_shard`` are not in the ``by_tenant_shard`` index, so listings miss them until this
gives them one (the same shard a new row with that id would get). Idempotent and resumable:
each update is conditional on the key still missing, so running it twice, or alongside live
traffic, writes every row at most once."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.dynamo import condition_failed
from leasehold.core.ids import shard_of
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import tenant_shard


def backfill_tenant_shards(app: Leasehold, *, page: int = 500) -> int:
    """Give every row without ``tenant_shard`` its shard; returns how many were written."""
    ddb, table = app.clients.dynamodb, app.settings.jobs_table
    written = 0
    kwargs: dict[str, Any] = {
        "TableName": table, "Limit": page, "ProjectionExpression": "job_id, tenant",
        "FilterExpression": "attribute_not_exists(tenant_shard)"}
    while True:
        response = ddb.scan(**kwargs)
        for item in response.get("Items", []):
            job_id, tenant = item["job_id"]["S"], item["tenant"]["S"]
            key = tenant_shard(tenant, shard_of(job_id, app.settings.tenant_shards))
            try:
                ddb.update_item(
                    TableName=table, Key={"job_id": {"S": job_id}},
                    UpdateExpression="SET tenant_shard = :k",
                    ConditionExpression="attribute_exists(job_id) AND "
                                        "attribute_not_exists(tenant_shard)",
                    ExpressionAttributeValues={":k": {"S": key}})
                written += 1
            except ClientError as exc:
                if not condition_failed(exc):
                    raise
        if "LastEvaluatedKey" not in response:
            return written
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]
