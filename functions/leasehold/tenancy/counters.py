"""A tenant's live-job slots and outcome counts, kept exact by writing them in the same
transaction as the job's own change.

Only jobs the API admitted hold a slot (``COUNTED`` on the row): admission takes it in the
transaction that creates the row (:mod:`leasehold.tenancy.admission`), and the store gives it
back in the transaction that makes the job terminal, through the companion below. A retry of a
transaction whose first try landed fails the job row's condition and so never counts twice; a
process that dies between two writes leaves nothing half done, because there is no second
write. Jobs made by schedules, triggers and workflows hold no slot and cost no extra write.
"""

from __future__ import annotations

from typing import Any

from leasehold.aws.dynamo import from_av, to_av
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Companion
from leasehold.lifecycle.submission import COUNTED
from leasehold.settings import Settings


def add(settings: Settings, tenant: str, deltas: dict[str, int]) -> dict[str, Any]:
    """The ``TransactWriteItems`` entry adding ``deltas`` to a tenant's counters."""
    names = {f"#a{i}": name for i, name in enumerate(deltas)}
    values = {f":v{i}": amount for i, amount in enumerate(deltas.values())}
    return {"Update": {
        "TableName": settings.tenants_table, "Key": {"tenant": {"S": tenant}},
        "UpdateExpression": "ADD " + ", ".join(f"#a{i} :v{i}" for i in range(len(deltas))),
        "ExpressionAttributeNames": names, "ExpressionAttributeValues": to_av(values)}}


def slot_writes(settings: Settings) -> Companion:
    """The store companion that gives a slot back when a counted job ends (and takes it again
    when a finished one is retried by hand), counting the outcome for ``/stats``."""

    def writes(job: Job, target: JobState) -> list[dict[str, Any]]:
        if not job.extra.get(COUNTED):
            return []
        if job.state.live and target.terminal:
            return [add(settings, job.tenant, {"live": -1, f"count_{target.value}": 1})]
        if job.state.terminal and target.live:
            return [add(settings, job.tenant, {"live": 1, f"count_{job.state.value}": -1})]
        return []

    return writes


def counts(app: Leasehold, tenant: str) -> tuple[dict[str, int], int]:
    """Finished jobs by outcome, and live jobs, of one tenant (counters, never a scan).

    Only jobs submitted through the API are counted; live jobs are not split by state (that
    would cost a write on every transition; queue depths show QUEUED and RUNNING per pool).
    """
    item = from_av(app.clients.dynamodb.get_item(
        TableName=app.settings.tenants_table, Key={"tenant": {"S": tenant}},
        ConsistentRead=True).get("Item", {}))
    by_state = {state.value: max(0, int(item.get(f"count_{state.value}", 0)))
                for state in JobState if state.terminal}
    return by_state, max(0, int(item.get("live", 0)))
