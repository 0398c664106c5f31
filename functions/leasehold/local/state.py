"""What ``leasehold dev`` keeps across restarts: its DynamoDB tables, in one JSON file.

moto's server keeps everything in memory and has no way to save it: its recorder logs every
request for a later replay, which for a scheduler means every poll and tick (a log that only
grows) and a replay that cannot reproduce SQS receipt handles or timing. So the runtime saves
the tables itself when it stops and loads them when it starts. The tables are enough: a job's
row is the outbox of its SQS message, so after loading, every QUEUED job is handed off again
(a duplicate of a message that survived is harmless: the lease is fenced by the epoch), and
a job that was RUNNING when the runtime died is re-driven by the sweeper once its lease
expires. What is not kept: the SQS messages themselves (DLQ depth starts at 0; DEAD jobs are
still listed and redriven from the table), live workers and the ticker's leader lease.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from leasehold.aws.dynamo import from_av
from leasehold.core.jobs import job_from_item
from leasehold.core.states import JobState
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold

log = logging.getLogger(__name__)
STATE_FILE = "state.json"
VERSION = 1
#: The tables kept, by their settings attribute (the file names them so, not by table name).
TABLES = ("jobs_table", "schedules_table", "tenants_table", "coordination_table",
          "workflows_table")
#: Coordination rows that describe processes, not data: a restarted runtime has new ones.
_TRANSIENT = frozenset({"leader", "worker"})


def _scan(app: Leasehold, table: str) -> Iterator[dict[str, Any]]:
    request: dict[str, Any] = {"TableName": table}
    while True:
        page = app.clients.dynamodb.scan(**request)
        yield from page.get("Items", [])
        if "LastEvaluatedKey" not in page:
            return
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def save(app: Leasehold, directory: Path) -> int:
    """Write every kept table to ``directory/state.json`` (atomically); the items saved."""
    tables = {}
    for name in TABLES:
        items = [item for item in _scan(app, getattr(app.settings, name))
                 if item.get("pk", {}).get("S") not in _TRANSIENT]
        tables[name] = items
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / STATE_FILE
    temporary = target.with_suffix(".tmp")
    temporary.write_text(json.dumps({"version": VERSION, "tables": tables}), encoding="utf-8")
    os.replace(temporary, target)  # a crash mid-write leaves the previous state whole
    return sum(len(items) for items in tables.values())


def load(app: Leasehold, directory: Path) -> int:
    """Put the saved tables back and hand off the QUEUED jobs again; the items loaded."""
    path = directory / STATE_FILE
    if not path.exists():
        return 0
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RuntimeError(f"cannot read {path} ({exc}); start with --fresh, which moves "
                           "it aside to state.json.old") from None
    if not isinstance(saved, dict) or saved.get("version") != VERSION:
        raise RuntimeError(f"{path} was not written by this version of Leasehold; start "
                           "with --fresh, which moves it aside to state.json.old")
    count = 0
    for name, items in saved["tables"].items():
        table = getattr(app.settings, name)
        for start in range(0, len(items), 25):  # BatchWriteItem takes 25 at a time
            requests: list[Any] = [{"PutRequest": {"Item": item}}
                                   for item in items[start:start + 25]]
            while requests:
                answer = app.clients.dynamodb.batch_write_item(RequestItems={table: requests})
                requests = list(answer.get("UnprocessedItems", {}).get(table, []))
        count += len(items)
    now = app.now()
    for item in saved["tables"].get("jobs_table", []):
        job = job_from_item(from_av(item))
        if job.state is JobState.QUEUED:
            handoff.send(app.queues, job, now)
    return count
