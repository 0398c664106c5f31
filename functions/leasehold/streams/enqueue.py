"""Transactional enqueue: a job that exists exactly when the application's own transaction
commits (issue 24), as River and Oban enqueue inside a Postgres transaction.

:func:`enqueue_item` builds ``TransactWriteItems`` entries (boto3 client shape) that the
application puts in its own ``transact_write_items`` beside its business writes:

* the job row's ``Put``, conditioned on the id being new and marked :data:`HANDOFF` (nobody
  has sent its message yet), validated exactly as ``POST /jobs`` validates a job;
* its tenant's live-job slot (``ADD live 1`` on one of the tenant's admission items, under
  that item's share of ``LEASEHOLD_TENANT_MAX_LIVE``), given back when the job ends, as an
  API submission's is; none when the tenant has no cap (``LEASEHOLD_TENANT_MAX_LIVE=0``).
  The submission *rate* is not applied: it guards the public front door,
  and this entry is written by the application's own credentials inside its own write.

Nothing else has to happen for the job to run: the change-stream relay sees the row's
``INSERT`` and hands it off (:func:`hand_off`: the message the submission path would have
sent). A relay that is down or gives up leaves the row QUEUED with a hand-off deadline, which
the sweeper already repairs as a lost hand-off. A stream record delivered twice sends the
message twice; the lease is fenced by the epoch, so the job still runs once. A job due later
than SQS can hold a message is SCHEDULED and the ticker fires it, as any delayed job.

Options: those of ``POST /jobs`` (``priority``, ``pool``, ``delay_seconds``, ``run_at``,
``idempotency_key``, ``max_attempts``, ``timeout_seconds``, ``retry``, ``labels``,
``deadline_seconds``, ``retention_days``, ``concurrency``, ``throttle``,
``start_within_seconds``, ``expires_at``), except ``unique`` and ``debounce``: they answer
with another job or fold this one into it, which takes a read no entry can make. With an
``idempotency_key`` the id is derived from it, so a business transaction replayed with the
same key is cancelled on the job's entry (:func:`refusal` says ``"duplicate"``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.dynamo import to_av
from leasehold.core.jobs import Job
from leasehold.core.spec import JobSpec, resolve
from leasehold.core.states import JobState
from leasehold.errors import LeaseholdError, ValidationError
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import (
    ADMISSION_SHARD,
    COUNTED,
    Submitted,
    new_job,
    through_intakes,
)
from leasehold.streams.images import job_of
from leasehold.tenancy.counters import slot_item
from leasehold.tenancy.limits import SLOT_FREE, Limits
from leasehold.tenancy.plans import limits_for

#: Marks a row written by :func:`enqueue_item`: its hand-off is the relay's.
HANDOFF = "handoff"
#: What the row's ``HANDOFF`` says.
BY_STREAM = "stream"
#: Options that need a read no transaction entry can make.
REFUSED = ("unique", "debounce")
#: The entries :func:`enqueue_item` returns, in order (see :func:`refusal`).
JOB, SLOT = 0, 1


def _spec(task: Any, payload: Any, tenant: str, options: Mapping[str, Any]) -> JobSpec:
    options = dict(options)
    for name in REFUSED:
        if options.get(name) is not None:
            raise ValidationError(name, f"enqueue_item cannot take {name!r}: it answers with "
                                        "another job, which takes a read; submit it instead")
    run_at = options.pop("run_at", None)
    expires_at = options.pop("expires_at", None)
    if isinstance(run_at, datetime):
        run_at = int(run_at.timestamp() * 1000)
    if isinstance(expires_at, datetime):
        expires_at = int(expires_at.timestamp() * 1000)
    name = getattr(task, "task_name", task)
    try:
        return JobSpec(task=name, payload=payload, tenant=tenant, run_at_ms=run_at,
                       expires_at_ms=expires_at, **options)
    except TypeError as exc:
        raise ValidationError("options", f"enqueue_item: {exc}") from None


def enqueue_item(app: Leasehold, task: Any, payload: Any = None, *, tenant: str,
                 limits: Limits | None = None, **options: Any) -> list[dict[str, Any]]:
    """The entries to add to your ``transact_write_items``: the job's ``Put``, then its
    tenant's live-job slot under ``limits`` (None: the API's, the deployment's settings
    and the tenant's plan). Raises
    :class:`~leasehold.errors.ValidationError` for bad input, before anything is written."""
    spec = _spec(task, payload, tenant, options)
    now = app.now()
    resolved = resolve(spec, app.registry, pools=app.settings.pools,
                       timeout_limits=app.settings.job_timeout_limits(), now_ms=now)
    definition = app.registry.get(spec.task)
    for name in REFUSED:
        if getattr(definition, name, None) is not None:
            raise ValidationError(name, f"task {spec.task!r} has a {name} default; "
                                        "enqueue_item cannot apply it: submit it instead")
    limits = limits or limits_for(app, tenant)
    shards = limits.shard_count()
    shard = random.randrange(shards)
    extra: dict[str, Any] = {HANDOFF: BY_STREAM, COUNTED: limits.capped}
    if limits.capped and shard:
        extra[ADMISSION_SHARD] = shard
    row = _through_intakes(app, spec, new_job(app, resolved, now, actor="enqueue",
                                              extra=extra))
    put = app.store.put_request(row)
    put.pop("ReturnValuesOnConditionCheckFailure")
    cap = limits.per_shard(shards, shard).max_live
    if cap is None:  # no cap: the row alone, holding no slot
        return [{"Put": put}]
    slot = {"TableName": app.settings.tenants_table,
            "Key": {"tenant": {"S": slot_item(tenant, shard)}},
            "UpdateExpression": "ADD #live :one",
            "ConditionExpression": SLOT_FREE,
            "ExpressionAttributeNames": {"#live": "live"},
            "ExpressionAttributeValues": to_av({":one": 1, ":cap": cap})}
    return [{"Put": put}, {"Update": slot}]


def _through_intakes(app: Leasehold, spec: JobSpec, row: Job) -> Job:
    """The row as the submission's intakes leave it (a start window's deadline), written by
    nobody here: the capture stands where the store's create would."""
    captured: list[Job] = []

    def capture(job: Job, writes: Sequence[Mapping[str, Any]]) -> Submitted:
        if writes:
            raise ValidationError("options", "enqueue_item: an option needs writes of its "
                                             "own; submit this job instead")
        captured.append(job)
        return Submitted(job, created=True)

    through_intakes(app, spec, capture)(row, ())
    if not captured:
        raise LeaseholdError("enqueue_item: an intake answered without a job")
    return captured[0]


def refusal(error: ClientError, first: int) -> str | None:
    """Why your transaction was cancelled by the entries of :func:`enqueue_item` that you put
    at index ``first``: ``"duplicate"`` (a job with this id, i.e. idempotency key, exists),
    ``"cap"`` (the tenant's admission item is at its live-job cap: try again, another item
    is picked), or None (something else of yours refused)."""
    reasons = error.response.get("CancellationReasons") or []

    def failed(index: int) -> bool:
        return index < len(reasons) and reasons[index].get("Code") == "ConditionalCheckFailed"

    if failed(first + JOB):
        return "duplicate"
    if failed(first + SLOT):
        return "cap"
    return None


def hand_off(app: Leasehold, records: Sequence[Mapping[str, Any]]) -> int:
    """Send the message of every job :func:`enqueue_item` created in ``records`` (stream
    records of the jobs table, in order); returns how many. Raises if SQS refused one: the
    relay's batch is then read again (a message sent twice is fenced by the lease)."""
    sent = 0
    now = app.now()
    for record in records:
        new = record.get("dynamodb", {}).get("NewImage")
        if record.get("eventName") != "INSERT" or not new or \
                new.get(HANDOFF, {}).get("S") != BY_STREAM:
            continue
        job = job_of(record)  # as DynamoDB Local writes it too (its untyped empty maps)
        if job is None or job.state is not JobState.QUEUED:
            continue  # due later than SQS holds a message: the ticker fires it
        if not handoff.send(app.queues, job, now):
            raise LeaseholdError(f"could not hand off enqueued job {job.job_id}")
        sent += 1
    return sent
