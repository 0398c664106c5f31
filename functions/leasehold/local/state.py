"""What ``leasehold dev`` keeps across restarts: its DynamoDB tables, in one JSON file.

moto's server keeps everything in memory and has no way to save it: its recorder logs every
request for a later replay, which for a scheduler means every poll and tick (a log that only
grows) and a replay that cannot reproduce SQS receipt handles or timing. So the runtime saves
the tables itself and loads them when it starts. What it saves is one cut of every table,
taken inside the emulator under the lock that serialises its DynamoDB requests
(:mod:`leasehold.local.snapshots`), so every invariant of the live tables holds in the file
(a tenant's live count equals its live jobs). The tables are enough: a job's row is the
outbox of its SQS message, so after loading, every QUEUED job is handed off again (a
duplicate of a message that survived is harmless: the lease is fenced by the epoch), and a
job that was RUNNING when the runtime died is re-driven by the sweeper once its lease
expires. What is not kept: the SQS messages themselves (DLQ depth starts at 0; DEAD jobs are
still listed and redriven from the table), live workers and the ticker's leader lease.

The file says when it was saved and whether by a runtime that stopped cleanly (``clean``),
so the next start can say that work after that moment was lost, and which version of each
table's key schema it holds (``table_versions``): a file of another version is refused at
start (its rows would not fit the tables; issue 46 changed the jobs table's key).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from leasehold.aws.definitions import TABLES as DEFINITIONS
from leasehold.aws.dynamo import from_av
from leasehold.core.jobs import job_from_item
from leasehold.core.states import JobState
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.local import snapshots

log = logging.getLogger(__name__)
STATE_FILE = "state.json"
VERSION = 1
#: The key schema version of each kept table (``aws.definitions``), written into the file;
#: a file without it was written before the versions were (every table at version 1).
TABLE_VERSIONS = {f"{table.role}_table": table.version for table in DEFINITIONS}
#: The tables kept, by their settings attribute (the file names them so, not by table name).
TABLES = ("jobs_table", "schedules_table", "tenants_table", "coordination_table",
          "workflows_table")
#: Coordination rows that describe processes, not data: a restarted runtime has new ones.
_TRANSIENT = frozenset({"leader", "worker"})


@dataclass(frozen=True)
class Saved:
    items: int
    #: The emulator's write count the cut holds (what a later save passes as ``unless``).
    sequence: int


@dataclass(frozen=True)
class Loaded:
    items: int
    #: When the file was saved, and whether by a runtime that then stopped cleanly (None:
    #: a file from before either was recorded).
    saved_at: datetime | None = None
    clean: bool | None = None


def save(app: Leasehold, directory: Path, *, clean: bool = False,
         unless: int | None = None) -> Saved | None:
    """Write one cut of every kept table to ``directory/state.json`` (atomically); None if
    nothing was written to the tables since the cut ``unless`` names. ``clean``: this is
    the last save of a runtime that stops."""
    names = {getattr(app.settings, name): name for name in TABLES}
    region = app.clients.dynamodb.meta.region_name
    assert app.settings.endpoint_url, "only the embedded emulator's tables are saved"
    cut = snapshots.take(app.settings.endpoint_url, region, names, unless=unless)
    if cut.tables is None:
        return None
    tables = {name: [item for item in cut.tables[table]
                     if name != "coordination_table"  # the jobs table has a pk too
                     or item.get("pk", {}).get("S") not in _TRANSIENT]
              for table, name in names.items()}
    saved_at = datetime.fromtimestamp(app.now() / 1000, UTC)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / STATE_FILE
    temporary = target.with_suffix(".tmp")
    temporary.write_text(json.dumps({"version": VERSION, "saved_at": saved_at.isoformat(),
                                     "clean": clean, "table_versions": TABLE_VERSIONS,
                                     "tables": tables}), encoding="utf-8")
    os.replace(temporary, target)  # a crash mid-write leaves the previous state whole
    return Saved(sum(len(items) for items in tables.values()), cut.sequence)


def move_aside(path: Path) -> Path | None:
    """Rename ``path`` to the next free ``<name>.old.<n>`` (never over an earlier one)."""
    if not path.exists():
        return None
    taken = [int(p.name.rsplit(".", 1)[1]) for p in path.parent.glob(path.name + ".old.*")
             if p.name.rsplit(".", 1)[1].isdigit()]
    target = path.with_name(f"{path.name}.old.{max(taken, default=0) + 1}")
    os.replace(path, target)
    return target


def check_table_versions(path: Path, saved: dict[str, Any]) -> None:
    """Refuse a file whose tables have another key schema than this Leasehold's."""
    found = saved.get("table_versions") or {}
    for name in saved.get("tables", {}):
        version, wanted = int(found.get(name, 1)), TABLE_VERSIONS.get(name, 1)
        if version != wanted:
            table = name.removesuffix("_table")
            raise RuntimeError(
                f"{path} holds the {table} table at version {version}, and this Leasehold "
                f"keeps it at version {wanted} (a new key schema: its rows cannot be loaded). "
                "Start with --fresh, which moves the old state aside (state.json.old.<n>), or "
                "run the Leasehold that wrote it until its jobs are done.")


def load(app: Leasehold, directory: Path) -> Loaded:
    """Put the saved tables back and hand off the QUEUED jobs again."""
    path = directory / STATE_FILE
    if not path.exists():
        return Loaded(0)
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise RuntimeError(f"cannot read {path} ({exc}); start with --fresh, which moves "
                           "it aside (state.json.old.<n>)") from None
    if not isinstance(saved, dict) or saved.get("version") != VERSION:
        raise RuntimeError(f"{path} was not written by this version of Leasehold; start "
                           "with --fresh, which moves it aside (state.json.old.<n>)")
    check_table_versions(path, saved)
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
    saved_at = saved.get("saved_at")
    return Loaded(count, datetime.fromisoformat(saved_at) if saved_at else None,
                  saved.get("clean"))
