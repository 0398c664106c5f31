"""Scaling: read units per ticker and sweeper pass as stored jobs grow; submission vs shards."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from moto import mock_aws

from bench.local import TASKS, fake_credentials
from bench.metering import Meter
from leasehold.aws import provision
from leasehold.aws.clients import Clients
from leasehold.aws.definitions import job_key
from leasehold.compose import compose
from leasehold.core.ids import new_job_id, shard_of
from leasehold.core.registry import load_modules
from leasehold.core.spec import JobSpec
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Worker
from leasehold.local import emulator
from leasehold.settings import Settings
from leasehold.time import ticker

#: What the stored jobs are: mostly finished, some waiting far ahead, some running.
MIX = (("SUCCEEDED", 0.8), ("SCHEDULED", 0.1), ("RUNNING", 0.1))
#: Work every pass finds, whatever the table size: due jobs and expired leases.
DUE_WORK = 10
DAY_MS = 86_400_000


def _settings(prefix: str, **overrides: Any) -> Settings:
    return Settings(
        jobs_table=f"{prefix}-jobs", schedules_table=f"{prefix}-schedules",
        tenants_table=f"{prefix}-tenants", coordination_table=f"{prefix}-coord",
        workflows_table=f"{prefix}-workflows", queue_prefix=prefix, task_modules=(TASKS,),
        lease_seconds=30.0, **overrides)


def _app(settings: Settings) -> Leasehold:
    clients = Clients(settings)
    provision.create_all(clients, settings)
    return compose(settings, clients=clients)


def _raw(app: Leasehold, job_id: str) -> dict[str, Any]:
    item: dict[str, Any] = app.clients.dynamodb.get_item(
        TableName=app.settings.jobs_table, Key=job_key(job_id))["Item"]
    return item


def templates(app: Leasehold) -> dict[str, dict[str, Any]]:
    """Real rows, made by the real code: a finished job, a job due tomorrow, a running job."""
    done = submit(app, JobSpec(task="bench.noop", tenant="store")).job.job_id
    url = app.queues.url("default", "normal")
    consume(Worker(app), app.queues.receive(url, max_messages=10))
    later = submit(app, JobSpec(task="bench.noop", tenant="store",
                                delay_seconds=86_400)).job.job_id
    succeeded = _raw(app, done)
    running = {k: v for k, v in succeeded.items() if k not in ("finished_at", "result")}
    running.update({"state": {"S": "RUNNING"}, "lease_owner": {"S": "bench:1:abc"},
                    "sweep_shard": {"N": "0"}, "sweep_at": {"N": "0"},
                    "lease_expires_at": {"N": "0"}})
    return {"SUCCEEDED": succeeded, "SCHEDULED": _raw(app, later), "RUNNING": running}


def clone(template: dict[str, Any], now: int, shards: int, *, run_at: int | None = None,
          lease_expires_at: int | None = None) -> dict[str, Any]:
    item = dict(template)
    job_id = new_job_id(now, "store", 16)
    item.update(job_key(job_id))  # the row's key: its home and id
    for name in ("due_shard", "sweep_shard"):
        if name in item:
            item[name] = {"N": str(shard_of(job_id, shards))}
    if run_at is not None:
        item["run_at"] = {"N": str(run_at)}
    if lease_expires_at is not None:
        item["lease_expires_at"] = {"N": str(lease_expires_at)}
        # As the sweeper leaves a running job's bound: moved up to its lease.
        item["sweep_at"] = {"N": str(lease_expires_at)}
    return item


def load(app: Leasehold, items: Sequence[dict[str, Any]]) -> None:
    ddb = app.clients.dynamodb
    table = app.settings.jobs_table
    for start in range(0, len(items), 25):
        request: Any = {table: [{"PutRequest": {"Item": i}} for i in items[start:start + 25]]}
        while request:
            request = ddb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}


def passes(stored: Sequence[int]) -> list[dict[str, Any]]:
    """For each size: store that many jobs, then meter one ticker pass and one sweeper pass."""
    fake_credentials()
    load_modules((TASKS,))
    results = []
    with mock_aws():
        for count in stored:
            app = _app(_settings("s" + uuid.uuid4().hex[:6]))
            shards = app.settings.shards
            shapes = templates(app)
            now = app.now()
            items = []
            for state, share in MIX:
                for _ in range(int(count * share)):
                    if state == "SCHEDULED":
                        items.append(clone(shapes[state], now, shards, run_at=now + DAY_MS))
                    elif state == "RUNNING":
                        items.append(clone(shapes[state], now, shards,
                                           lease_expires_at=now + DAY_MS))
                    else:
                        items.append(clone(shapes[state], now, shards))
            for _ in range(DUE_WORK):
                items.append(clone(shapes["SCHEDULED"], now, shards, run_at=now - 1000))
                items.append(clone(shapes["RUNNING"], now, shards,
                                   lease_expires_at=now - 60_000))
            started = time.monotonic()
            load(app, items)
            loaded = time.monotonic() - started
            meter = Meter(app.clients, app.settings)
            started = time.monotonic()
            tick = ticker.tick(app)
            tick_seconds = time.monotonic() - started
            tick_usage = meter.reset()
            started = time.monotonic()
            sweep = sweeper.sweep(app)
            sweep_seconds = time.monotonic() - started
            sweep_usage = meter.reset()
            results.append({
                "stored_jobs": len(items),
                "load_seconds": round(loaded, 1),
                "ticker": {"read_units": tick_usage.total_read_units(),
                           "read_units_by_index": dict(tick_usage.read_units),
                           "queries": tick_usage.requests.get("dynamodb.Query", 0),
                           "requests": tick_usage.total_requests(),
                           "promoted": tick.promoted, "seconds_in_moto": round(tick_seconds, 3)},
                "sweeper": {"read_units": sweep_usage.total_read_units(),
                            "read_units_by_index": dict(sweep_usage.read_units),
                            "queries": sweep_usage.requests.get("dynamodb.Query", 0),
                            "requests": sweep_usage.total_requests(),
                            "recovered": sweep.recovered,
                            "seconds_in_moto": round(sweep_seconds, 3)},
            })
    return results


def submission_by_shards(shard_counts: Sequence[int], n: int) -> list[dict[str, Any]]:
    """Library submissions per second (8 threads, no workers) with each shard count."""
    fake_credentials()
    load_modules((TASKS,))
    server = emulator.start()
    results = []
    try:
        for shards in shard_counts:
            app = _app(_settings("h" + uuid.uuid4().hex[:6], endpoint_url=server.endpoint,
                                 shards=shards))
            submit(app, JobSpec(task="bench.noop"))  # warm: clients, queue URL
            started = time.monotonic()
            specs = [JobSpec(task="bench.noop")] * n
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(submit, [app] * n, specs))
            elapsed = time.monotonic() - started
            results.append({"shards": shards, "jobs": n,
                            "submitted_per_second": round(n / elapsed, 1)})
    finally:
        server.stop()
    return results
