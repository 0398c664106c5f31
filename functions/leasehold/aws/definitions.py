"""The tables and queues Leasehold needs: the one source for the CDK stack and the local runtime.

Both ``infra/`` and ``leasehold.local`` build their resources from these values, and a test
checks that what each creates is what is written here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from leasehold.core.ids import home_of
from leasehold.core.retention import PURGE_AT
from leasehold.settings import PRIORITIES, Settings

AttrType = Literal["S", "N"]
Projection = Literal["KEYS_ONLY", "INCLUDE", "ALL"]


@dataclass(frozen=True)
class Key:
    name: str
    type: AttrType = "S"


@dataclass(frozen=True)
class Index:
    name: str
    partition: Key
    sort: Key | None = None
    projection: Projection = "KEYS_ONLY"
    include: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableDefinition:
    #: Which setting holds the physical name: ``jobs`` -> ``Settings.jobs_table``.
    role: str
    partition: Key
    sort: Key | None = None
    indexes: tuple[Index, ...] = ()
    ttl_attribute: str | None = None
    stream: bool = False
    #: Raised when the key schema changes (DynamoDB cannot change a table's key in place):
    #: a table of another version is a new table, named ``<prefix>-<role>-v<version>``.
    version: int = 1

    def table_name(self, settings: Settings) -> str:
        return str(getattr(settings, f"{self.role}_table"))

    def default_name(self, prefix: str) -> str:
        """The name a deployment with ``prefix`` gives this table."""
        return f"{prefix}-{self.role}" + (f"-v{self.version}" if self.version > 1 else "")

    def attributes(self) -> dict[str, AttrType]:
        keys = [self.partition, self.sort]
        for index in self.indexes:
            keys += [index.partition, index.sort]
        return {key.name: key.type for key in keys if key is not None}

    def create_table_kwargs(self, settings: Settings) -> dict[str, Any]:
        """Arguments for boto3 ``create_table`` (on-demand, as the stack deploys it)."""

        def schema(partition: Key, sort: Key | None) -> list[dict[str, str]]:
            out = [{"AttributeName": partition.name, "KeyType": "HASH"}]
            if sort:
                out.append({"AttributeName": sort.name, "KeyType": "RANGE"})
            return out

        kwargs: dict[str, Any] = {
            "TableName": self.table_name(settings),
            "BillingMode": "PAY_PER_REQUEST",
            "KeySchema": schema(self.partition, self.sort),
            "AttributeDefinitions": [
                {"AttributeName": name, "AttributeType": kind}
                for name, kind in sorted(self.attributes().items())
            ],
        }
        if self.indexes:
            gsis = []
            for index in self.indexes:
                projection: dict[str, Any] = {"ProjectionType": index.projection}
                if index.include:
                    projection["NonKeyAttributes"] = list(index.include)
                gsis.append(
                    {
                        "IndexName": index.name,
                        "KeySchema": schema(index.partition, index.sort),
                        "Projection": projection,
                    }
                )
            kwargs["GlobalSecondaryIndexes"] = gsis
        if self.stream:
            kwargs["StreamSpecification"] = {"StreamEnabled": True,
                                             "StreamViewType": "NEW_AND_OLD_IMAGES"}
        return kwargs


#: Sparse, sharded: only SCHEDULED jobs carry ``due_shard``; the ticker reads due ones only.
DUE_INDEX = Index("due", Key("due_shard", "N"), Key("run_at", "N"))
#: Sparse, sharded: only QUEUED and RUNNING jobs carry ``sweep_shard``. ``sweep_at`` is a lower
#: bound of when the row may need the sweeper (never later than its lease or hand-off deadline),
#: so a lease and its heartbeats never move it; KEYS_ONLY, for the same reason (a projected
#: ``state``/``epoch``/expiry would make every lease rewrite the index). See docs/design.md.
SWEEP_INDEX = Index("sweep", Key("sweep_shard", "N"), Key("sweep_at", "N"))
#: Sparse, sharded: only rows a Query of their tenant's homes does not list in creation order
#: carry ``tenant_shard`` (``{tenant}#{k}``, k from the job id over ``Settings.tenant_shards``):
#: derived ids (keyed jobs, workflow steps, children, schedule and trigger runs), whose id is
#: not time-ordered (``core.ids.listed_at_home``). A plain job is listed from the table
#: itself and writes no entry here (issue 46).
BY_TENANT_INDEX = Index("by_tenant_shard", Key("tenant_shard"), Key("created_at", "N"))
#: Sparse: only jobs a schedule fired carry ``schedule_id``; ``scheduled_for`` is ISO-8601 UTC
#: (fixed width, so it sorts by time). Lists a schedule's runs and finds the ones handed off
#: ahead of time that a pause or an update must cancel.
BY_SCHEDULE_INDEX = Index("by_schedule", Key("schedule_id"), Key("scheduled_for"))

#: Sparse: only QUEUED jobs parked for a concurrency slot carry ``parked_key`` (their scoped
#: key, ``{tenant}#flow#{key}``); the write that frees a slot wakes the oldest (leasehold.flow).
PARKED_INDEX = Index("parked", Key("parked_key"), Key("parked_at", "N"))

def job_key(job_id: str) -> dict[str, Any]:
    """The key of a job's row in the jobs table: every ``Key`` of a job row (get, update,
    delete, a transaction's item, a batch read) is built here, so the table's key schema is
    written in one place."""
    return {"pk": {"S": home_of(job_id)}, "job_id": {"S": job_id}}


#: Keyed by home and id (``core.ids``): ``pk`` is the last 11 characters of ``job_id`` (its
#: tenant's tag and a shard), so a row's key follows from its id, and a tenant's jobs are
#: the items of its homes, in id order (time-ordered ids: creation order). Version 2: the
#: key was ``job_id`` alone, with a ``by_tenant_shard`` entry for every job (issue 46).
JOBS = TableDefinition(
    role="jobs",
    partition=Key("pk"),
    sort=Key("job_id"),
    version=2,
    indexes=(DUE_INDEX, SWEEP_INDEX, BY_TENANT_INDEX, BY_SCHEDULE_INDEX, PARKED_INDEX),
    # Only terminal rows carry it (leasehold.core.retention): nothing live is ever deleted.
    ttl_attribute=PURGE_AT,
    # NEW_AND_OLD_IMAGES: the change-stream relay (leasehold.streams) publishes job state
    # events from committed rows.
    stream=True,
)
SCHEDULES = TableDefinition(
    role="schedules",
    partition=Key("schedule_id"),
    indexes=(
        Index("due", Key("due_shard", "N"), Key("next_fire_at", "N")),
        Index("by_tenant", Key("tenant"), Key("created_at", "N")),
    ),
)
#: Token buckets and live-job counters, one item per tenant; per-task figures
#: (``leasehold.metrics``) are short-lived items here, cleaned by TTL.
TENANTS = TableDefinition(role="tenants", partition=Key("tenant"), ttl_attribute="expires_at_s")
#: Worker registry and leader leases: short-lived items, cleaned by TTL (never trusted for expiry).
COORDINATION = TableDefinition(
    role="coordination", partition=Key("pk"), sort=Key("sk"), ttl_attribute="expires_at_s"
)

#: Multi-step workflows (their steps are rows of ``jobs``). Sparse, sharded ``live``: only
#: workflows whose steps may still be live carry ``live_shard``; the reconciler reads it.
WORKFLOWS = TableDefinition(
    role="workflows",
    partition=Key("workflow_id"),
    indexes=(
        Index("live", Key("live_shard", "N"), Key("check_at", "N")),
        Index("by_tenant", Key("tenant"), Key("created_at", "N")),
    ),
    # Written once a finished workflow is settled (every step terminal), with its steps'.
    ttl_attribute=PURGE_AT,
)

TABLES = (JOBS, SCHEDULES, TENANTS, COORDINATION, WORKFLOWS)


#: SQS keeps a message at most 14 days.
MAX_RETENTION_SECONDS = 14 * 24 * 3600


@dataclass(frozen=True)
class QueueDefinition:
    pool: str
    priority: str
    #: Deliveries before SQS moves a message to the DLQ (crashing consumers, not job failures).
    max_receive_count: int = 5
    #: A job queue keeps messages 7 days: the job row is the outbox, so an expired hand-off
    #: is re-sent by the sweeper, never lost.
    retention_seconds: int = 7 * 24 * 3600
    #: A DLQ keeps them 14 days (the SQS maximum). A message SQS moves there keeps its
    #: original enqueue time, so a DLQ must keep messages longer than its source queue, or
    #: a dead letter expires early (at once, if it spent the source's whole retention there).
    dlq_retention_seconds: int = MAX_RETENTION_SECONDS
    attributes: dict[str, str] = field(default_factory=dict)

    def name(self, settings: Settings) -> str:
        return queue_name(settings.queue_prefix, self.pool, self.priority)

    def dlq_name(self, settings: Settings) -> str:
        return self.name(settings) + "-dlq"


def queue_name(prefix: str, pool: str, priority: str) -> str:
    return f"{prefix}-{pool}-{priority}"


def queues(settings: Settings) -> tuple[QueueDefinition, ...]:
    return tuple(
        QueueDefinition(pool, priority) for pool in settings.pools for priority in PRIORITIES
    )
