"""Unique jobs: while a job with key K is live, a submission with K answers that job.

The claim is one item per key in the tenants table (``{tenant}#unique#{K}`` holding the
job's id), put in the same transaction as the job's row with ``attribute_not_exists``: of two
racing submissions one commits and the other's transaction is cancelled, reads the holder
from the failed condition and answers it (200, ``duplicate``). The claim is deleted by a
store companion in the transaction that ends the job, so no crash or lost response can leave
a claim without a live job or a live job without its claim (there is no second write). A
manual re-run puts the claim back in the transaction that makes the job live again, and is
refused while another live job holds the key.

Unlike an idempotency key (which keeps answering after the job ended), a claim is gone with
its job. Should a claim ever point at a job that is no longer live (its row deleted by TTL,
say), the next submission with the key frees it, in one transaction that checks the holder
is finished, and takes it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import Cancelled, to_av, transact_write
from leasehold.core import keyed
from leasehold.core.flowcontrol import UNIQUE_KEY
from leasehold.core.jobs import Job
from leasehold.core.spec import JobSpec
from leasehold.core.states import TERMINAL, JobState
from leasehold.errors import Conflict, NotFound
from leasehold.flow.keys import item_key, option
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Companion
from leasehold.lifecycle.submission import Create, Submitted
from leasehold.settings import Settings

log = logging.getLogger(__name__)

#: Submissions that find the claim held by a finished job free it and try again this often.
TRIES = 3


def claim_item(tenant: str, key: str) -> str:
    return item_key(tenant, "unique", key)


def unique_key(app: Leasehold, spec: JobSpec, payload: Any) -> str | None:
    """The job's unique key (its own option, else its task's), or None."""
    return keyed.unique_key(option(spec.unique, app.registry.get(spec.task).unique), payload)


def intake(app: Leasehold, spec: JobSpec, job: Job, also: Sequence[Mapping[str, Any]],
           create: Create) -> Submitted:
    key = unique_key(app, spec, job.payload)
    if key is None:
        return create(job, also)
    row = replace(job, extra={**job.extra, UNIQUE_KEY: key})
    name = claim_item(job.tenant, key)
    table = app.settings.tenants_table
    for _ in range(TRIES):
        claim = {"Put": {
            "TableName": table, "Item": to_av({"tenant": name, "job_id": row.job_id}),
            "ConditionExpression": "attribute_not_exists(tenant)",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}}
        index = len(also) + 1  # item 0 is the row
        try:
            return create(row, [*also, claim])
        except Cancelled as cancelled:
            if not cancelled.failed(index):
                raise
            holder = str((cancelled.items[index] or {}).get("job_id", ""))
        try:
            current = app.store.get(holder)
        except NotFound:
            current = None
        if current is not None and current.state.live:
            return Submitted(current, created=False, duplicate=True)
        _free(app, name, holder)
    raise Conflict(f"unique key {key!r} kept changing hands; try again")


def _free(app: Leasehold, name: str, holder: str) -> None:
    """Delete a claim whose holder is finished or gone, checking both in one transaction
    (a holder re-run meanwhile keeps its claim)."""
    states = {f":s{i}": state.value for i, state in enumerate(sorted(TERMINAL))}
    try:
        transact_write(app.clients.dynamodb, [
            {"ConditionCheck": {
                "TableName": app.settings.jobs_table, "Key": job_key(holder),
                "ConditionExpression": (f"attribute_not_exists(job_id) OR #state IN "
                                        f"({', '.join(states)})"),
                "ExpressionAttributeNames": {"#state": "state"},
                "ExpressionAttributeValues": to_av(states)}},
            {"Delete": {
                "TableName": app.settings.tenants_table, "Key": {"tenant": {"S": name}},
                "ConditionExpression": "job_id = :j",
                "ExpressionAttributeValues": to_av({":j": holder})}},
        ])
        log.warning("freed unique claim %s of finished job %s", name, holder)
    except Cancelled:
        pass  # the claim moved on (or its holder came back): the next try reads it again


def claim_writes(settings: Settings) -> Companion:
    """The store companion: the claim goes with the transition that ends its job, and comes
    back with one that makes it live again (a manual re-run: refused while another live job
    holds the key)."""

    def writes(job: Job, target: JobState) -> list[dict[str, Any]]:
        key = job.extra.get(UNIQUE_KEY)
        if key is None:
            return []
        name = {"tenant": {"S": claim_item(job.tenant, str(key))}}
        mine = to_av({":j": job.job_id})
        if job.state.live and target.terminal:
            # Conditioned on holding it: a job ends only with its own claim.
            return [{"Delete": {"TableName": settings.tenants_table, "Key": name,
                                "ConditionExpression": "attribute_not_exists(tenant) OR "
                                                       "job_id = :j",
                                "ExpressionAttributeValues": mine}}]
        if job.state.terminal and target.live:
            return [{"Put": {"TableName": settings.tenants_table,
                             "Item": {**name, "job_id": {"S": job.job_id}},
                             "ConditionExpression": "attribute_not_exists(tenant) OR "
                                                    "job_id = :j",
                             "ExpressionAttributeValues": mine}}]
        return []

    return writes


def install(app: Leasehold) -> None:
    app.intakes.append(intake)
    app.store.companions.append(claim_writes(app.settings))
