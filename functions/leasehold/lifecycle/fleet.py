"""The registry of live workers in the ``coordination`` table: polling workers (local
runtime, ECS), and remote workers as their lease requests show them (issue 45).

Each worker puts one item (``pk="worker"``, ``sk=worker_id``) on every heartbeat. Liveness is
decided by ``last_heartbeat`` against the reader's clock, never by the TTL attribute: DynamoDB
deletes expired items within about two days, so TTL only keeps the table tidy.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.dynamo import condition_failed, query, to_av
from leasehold.lifecycle.app import Leasehold

PARTITION = "worker"
#: A worker is listed while its last heartbeat is younger than this many heartbeats.
MISSED_HEARTBEATS = 3
#: A remote worker's jobs in hand: a string set, added to by each lease request and taken
#: from as each lease ends (a polling worker writes its ``current_jobs`` whole instead).
HELD = "held_jobs"
#: At most this many held jobs per lease request are recorded (``max_jobs`` is 10).
MAX_HELD = 100


@dataclass(frozen=True, kw_only=True)
class WorkerInfo:
    worker_id: str
    pool: str
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    started_at: int = 0
    last_heartbeat: int = 0
    heartbeat_seconds: float = 5.0
    current_jobs: tuple[str, ...] = ()
    processed: int = 0
    #: "python" (a polling worker of this package) or "remote" (a worker in any language
    #: leasing over HTTP: its ``last_heartbeat`` is its last lease request).
    kind: str = "python"


def heartbeat(app: Leasehold, info: WorkerInfo, *, current_jobs: Sequence[str] = (),
              processed: int = 0) -> None:
    now = app.now()
    ttl_seconds = int(info.heartbeat_seconds * MISSED_HEARTBEATS * 10) + 3600
    item: dict[str, Any] = {
        "pk": PARTITION, "sk": info.worker_id, "pool": info.pool, "host": info.host,
        "pid": info.pid, "started_at": info.started_at or now, "last_heartbeat": now,
        "heartbeat_ms": int(info.heartbeat_seconds * 1000),
        "current_jobs": list(current_jobs)[:100], "processed": processed,
        "expires_at_s": now // 1000 + ttl_seconds,
    }
    app.clients.dynamodb.put_item(TableName=app.settings.coordination_table, Item=to_av(item))


def leased_by(app: Leasehold, *, worker_id: str, pool: str, jobs: Sequence[str],
              interval_seconds: float) -> None:
    """A remote worker's lease request (``leasehold.remote``): it is seen now, and holds
    ``jobs`` from this request besides those it held (:data:`HELD`, until :func:`released`);
    listed while it asks again within ``MISSED_HEARTBEATS`` intervals. One small update per
    lease request, in place of a heartbeat of its own."""
    now = app.now()
    ttl_seconds = int(interval_seconds * MISSED_HEARTBEATS * 10) + 3600
    values: dict[str, Any] = {
        ":pool": pool, ":host": "remote", ":zero": 0, ":kind": "remote", ":now": now,
        ":beat": int(interval_seconds * 1000), ":ttl": now // 1000 + ttl_seconds,
        ":count": len(jobs)}
    names = {"#pool": "pool", "#host": "host", "#pid": "pid", "#kind": "kind",
             "#started": "started_at", "#last": "last_heartbeat", "#beat": "heartbeat_ms",
             "#ttl": "expires_at_s", "#processed": "processed"}
    add = "#processed :count"
    if jobs:  # a string set is never empty: an empty poll leaves the held set as it is
        add += ", #held :held"
        names["#held"] = HELD
    av = to_av(values)
    if jobs:
        av[":held"] = {"SS": sorted(set(jobs))[:MAX_HELD]}
    app.clients.dynamodb.update_item(
        TableName=app.settings.coordination_table,
        Key={"pk": {"S": PARTITION}, "sk": {"S": worker_id}},
        # Each name through a placeholder: some (pool, ...) are DynamoDB reserved words.
        UpdateExpression=(
            "SET #pool = :pool, #host = :host, #pid = :zero, #kind = :kind, "
            "#started = if_not_exists(#started, :now), #last = :now, "
            f"#beat = :beat, #ttl = :ttl ADD {add}"),
        ExpressionAttributeNames=names, ExpressionAttributeValues=av)


def released(app: Leasehold, *, worker_id: str, job_id: str) -> None:
    """The remote worker ``worker_id`` no longer holds ``job_id`` (its lease ended: finished,
    cancelled, timed out or found lost). Never makes a row for a worker that has none."""
    try:
        app.clients.dynamodb.update_item(
            TableName=app.settings.coordination_table,
            Key={"pk": {"S": PARTITION}, "sk": {"S": worker_id}},
            UpdateExpression="DELETE #held :job", ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeNames={"#held": HELD},
            ExpressionAttributeValues={":job": {"SS": [job_id]}})
    except ClientError as exc:
        if not condition_failed(exc):
            raise


def deregister(app: Leasehold, worker_id: str) -> None:
    app.clients.dynamodb.delete_item(
        TableName=app.settings.coordination_table,
        Key={"pk": {"S": PARTITION}, "sk": {"S": worker_id}})


def live_workers(app: Leasehold, *, pool: str | None = None) -> list[WorkerInfo]:
    """Workers whose last heartbeat is recent, oldest first; a silent one drops off."""
    now = app.now()
    found: list[WorkerInfo] = []
    for item in query(app.clients.dynamodb, TableName=app.settings.coordination_table,
                      KeyConditionExpression="pk = :pk", ConsistentRead=True,
                      ExpressionAttributeValues=to_av({":pk": PARTITION})):
        beat_ms = int(item.get("heartbeat_ms", 5000))
        if now - int(item["last_heartbeat"]) > beat_ms * MISSED_HEARTBEATS:
            continue
        if pool is not None and item.get("pool") != pool:
            continue
        found.append(WorkerInfo(
            worker_id=item["sk"], pool=item["pool"], host=item.get("host", ""),
            pid=int(item.get("pid", 0)), started_at=int(item.get("started_at", 0)),
            last_heartbeat=int(item["last_heartbeat"]), heartbeat_seconds=beat_ms / 1000,
            current_jobs=tuple(sorted(item.get(HELD, ()))) if item.get("kind") == "remote"
            else tuple(item.get("current_jobs", ())),
            processed=int(item.get("processed", 0)), kind=str(item.get("kind", "python"))))
    return sorted(found, key=lambda w: (w.started_at, w.worker_id))
