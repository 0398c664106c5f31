"""Concurrency slots: one item per tenant's key in the tenants table, its holders a set.

The item ``{tenant}#flow#{key}`` holds ``holders``, a string set of ``{job_id}#{epoch}``, one
per RUNNING job with the key. A lease adds its member in the transaction that leases the job,
under the condition that the set has fewer than ``limit`` members and the key is not paused;
the transition that ends the attempt deletes it, as a store companion in the same
transaction. Both writes are conditioned through the job row (state and epoch), so a retried
transaction whose first try landed never applies twice, and a set (not a counter) makes a
release idempotent: a slot can neither leak nor be given back twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leasehold.aws.dynamo import batch_get, from_av, to_av
from leasehold.core.flowcontrol import GATE
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.lifecycle.store import Companion
from leasehold.settings import Settings

HOLDERS = "holders"
PAUSED = "paused"


def member(job_id: str, epoch: int) -> str:
    return f"{job_id}#{epoch}"


def take(settings: Settings, concurrency: Mapping[str, Any], tenant_of_slot: str,
         job_id: str, epoch: int) -> dict[str, Any]:
    """The lease's entry taking a slot: refused while ``limit`` are held or the key is paused."""
    return {"Update": {
        "TableName": settings.tenants_table, "Key": {"tenant": {"S": concurrency["slot"]}},
        "UpdateExpression": "ADD holders :me SET #limit = :limit, flow_key = :key, "
                            "flow_tenant = :tenant",
        "ConditionExpression": "attribute_not_exists(paused) AND "
                               "(attribute_not_exists(holders) OR size(holders) < :limit)",
        "ExpressionAttributeNames": {"#limit": "limit"},
        "ExpressionAttributeValues": to_av({
            ":me": {member(job_id, epoch)}, ":limit": int(concurrency["limit"]),
            ":key": concurrency["key"], ":tenant": tenant_of_slot}),
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}


def still_full(settings: Settings, concurrency: Mapping[str, Any]) -> dict[str, Any]:
    """A parking write's check: the slot is still full (or paused). Without it a job could
    park just after the last holder let go and woke nobody (it looked before the park)."""
    return {"ConditionCheck": {
        "TableName": settings.tenants_table, "Key": {"tenant": {"S": concurrency["slot"]}},
        "ConditionExpression": "attribute_exists(paused) OR "
                               "(attribute_exists(holders) AND size(holders) >= :limit)",
        "ExpressionAttributeValues": to_av({":limit": int(concurrency["limit"])})}}


def release_writes(settings: Settings) -> Companion:
    """The store companion giving a RUNNING job's slot back with the change that ends its
    attempt (success, failure, retry, cancel, or the sweeper's take-over of a lost lease)."""

    def writes(job: Job, target: JobState) -> list[dict[str, Any]]:
        gate = job.extra.get(GATE)
        if job.state is not JobState.RUNNING or target is JobState.RUNNING or \
                not isinstance(gate, Mapping) or "concurrency" not in gate:
            return []
        return [{"Update": {
            "TableName": settings.tenants_table,
            "Key": {"tenant": {"S": gate["concurrency"]["slot"]}},
            "UpdateExpression": "DELETE holders :me",
            "ExpressionAttributeValues": to_av({":me": {member(job.job_id, job.epoch)}})}}]

    return writes


def holders(item: Mapping[str, Any] | None) -> set[str]:
    return set((item or {}).get(HOLDERS) or ())


def read(ddb: Any, settings: Settings, slot: str) -> dict[str, Any]:
    response = ddb.get_item(TableName=settings.tenants_table, Key={"tenant": {"S": slot}},
                            ConsistentRead=True)
    return from_av(response.get("Item") or {})


def read_many(ddb: Any, settings: Settings, slots: list[str]) -> list[dict[str, Any]]:
    return batch_get(ddb, settings.tenants_table, "tenant", slots)
