"""Deleting finished jobs' rows, never one that something live still reads.

A finished row may be what another record still points at: a workflow's step (the workflow's
view, its retry and its dependents' inputs read it until the workflow itself is gone), or a
durable child (its parent reads the child's result when it wakes). The lifecycle does not know
these features; each registers a guard on :attr:`Leasehold.deletion_guards`, and every delete
of a job row goes through :func:`delete_finished`, which asks them all first.

A guard fails closed: a read that fails raises, and nothing is deleted.
DynamoDB TTL is the one deletion the code cannot refuse, so retention keeps it in step by
other means (a step gets its TTL only once its workflow is settled:
:mod:`leasehold.workflows.retention`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from botocore.exceptions import ClientError

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import condition_failed, to_av
from leasehold.core.jobs import Job
from leasehold.lifecycle.app import Leasehold


@dataclass
class Deletion:
    """What :func:`delete_finished` did to a batch of finished jobs."""

    deleted: list[str] = field(default_factory=list)
    #: Kept because something still references them: job id -> (guard name, why).
    referenced: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Changed since they were read (retried meanwhile): left alone.
    changed: list[str] = field(default_factory=list)


def referenced(app: Leasehold, jobs: Sequence[Job]) -> dict[str, tuple[str, str]]:
    """The jobs some registered guard refuses to have deleted: id -> (guard name, why)."""
    found: dict[str, tuple[str, str]] = {}
    for name, guard in app.deletion_guards.items():
        for job_id, why in guard(app, [j for j in jobs if j.job_id not in found]).items():
            found.setdefault(job_id, (name, why))
    return found


def delete_finished(app: Leasehold, jobs: Sequence[Job]) -> Deletion:
    """Delete each finished job's row unless a guard refuses it, on the condition that the
    row is still in the state, epoch and tenant read (a job retried meanwhile is kept)."""
    done = Deletion(referenced=referenced(app, jobs))
    for job in jobs:
        if job.job_id in done.referenced:
            continue
        (done.deleted if _delete(app, job) else done.changed).append(job.job_id)
    return done


def _delete(app: Leasehold, job: Job) -> bool:
    if job.state.live:
        return False
    try:
        app.clients.dynamodb.delete_item(
            TableName=app.settings.jobs_table, Key=job_key(job.job_id),
            ConditionExpression="#state = :state AND epoch = :epoch AND tenant = :tenant",
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=to_av({":state": job.state.value, ":epoch": job.epoch,
                                             ":tenant": job.tenant}))
    except ClientError as exc:
        if not condition_failed(exc):
            raise
        # Gone is deleted: botocore's retry of a delete whose response was lost finds the
        # row it removed missing (a row retried meanwhile is still there, and is kept).
        return "Item" not in app.clients.dynamodb.get_item(
            TableName=app.settings.jobs_table, Key=job_key(job.job_id),
            ConsistentRead=True, ProjectionExpression="job_id")
    return True
