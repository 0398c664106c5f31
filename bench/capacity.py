"""docs/capacity.md, rendered from bench/results.json: what 1k, 10k and 50k jobs/s need.

Every figure is the measured per-job units of a bench run times the rate, against the
published per-partition, per-queue and per-account limits below; re-render after a bench with
``python -m bench.capacity`` (``bench.run`` does it at the end of every run).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

from bench.tenant_shards import ADMISSION_UNITS_PER_JOB, INDEX_UNITS_PER_JOB
from leasehold.settings import Settings
from leasehold.tenancy.admission import JOBS_PER_SHARD, SPREAD, Limits

ROOT = Path(__file__).resolve().parent.parent
RATES = (1_000, 10_000, 50_000)
#: DynamoDB: write units per second one partition (and one partition key) takes.
PARTITION_WRITE_UNITS = 1_000
#: SQS standard queue: messages in flight (received, not deleted) at most.
SQS_IN_FLIGHT = 120_000
#: EventBridge: PutEvents entries per second per account, by default in the largest regions
#: (a quota to raise; lower in others).
EVENTBRIDGE_ENTRIES = 10_000
#: Lambda: concurrent executions per account and region, by default (a quota to raise).
LAMBDA_CONCURRENCY = 1_000
LAMBDA_BATCH = 10
SECONDS_PER_MONTH = 30 * 24 * 3600


def rows(results: dict[str, Any], settings: Settings | None = None) -> list[dict[str, Any]]:
    """The figures for each rate in :data:`RATES` (all jobs immediate, API-admitted, one
    tenant: the worst case for its keys)."""
    settings = settings or Settings()
    per_job = results["per_job"]
    units = per_job["immediate"]["write_units_by_table"]
    ops = per_job["immediate"]["requests_by_operation"]
    worker_seconds = float(per_job["worker_seconds_per_job"])
    price = results["cost"]["per_million_jobs"]["immediate"]["total"]
    fixed = results["cost"].get("fixed_per_month", 0.0)
    leases = units.get("jobs/leases", 0.0)
    # Every write of a job's row lands in one of its tenant's homes (the jobs table is keyed
    # by home, issue 46); a run from before measured the listing index's entry instead.
    index = max(units.get("jobs", 0.0), INDEX_UNITS_PER_JOB)
    out = []
    for rate in RATES:
        table = rate * units.get("jobs", 0.0)
        lease_key = rate * leases / settings.shards
        concurrency = rate * worker_seconds
        # A tenant admitted at this rate, its burst and cap as wide as the rate allows.
        admission = Limits(rate=rate, burst=rate, max_live=rate * 60).shard_count()
        out.append({
            "rate": rate,
            "jobs_table_write_units": table,
            "jobs_table_partitions": math.ceil(table / PARTITION_WRITE_UNITS),
            "leases_index_write_units": rate * leases,
            "leases_units_per_shard_key": lease_key,
            "leases_shards_needed": math.ceil(rate * leases / PARTITION_WRITE_UNITS),
            "tenant_index_units_per_shard_key": rate * index / settings.tenant_shards,
            "tenant_index_shards_needed": math.ceil(rate * index / PARTITION_WRITE_UNITS),
            "admission_shards": admission,
            "admission_units_per_shard_key": rate * ADMISSION_UNITS_PER_JOB / admission,
            "sqs_requests_per_second": rate * sum(
                v for k, v in ops.items() if k.startswith("sqs.")),
            "sqs_in_flight": concurrency * LAMBDA_BATCH,
            "lambda_concurrency": concurrency,
            "eventbridge_entries_per_second": rate * ops.get("events.PutEvents", 0.0),
            "monthly_cost": rate * SECONDS_PER_MONTH * price / 1e6 + fixed,
        })
    return out


def _n(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:,.1f}"


def _count(value: float) -> str:
    return f"{math.ceil(value):,}"


def _flag(value: float, limit: float) -> str:
    return f"**{_n(value)}** (over {limit:,.0f})" if value > limit else _n(value)


def markdown(results: dict[str, Any], settings: Settings | None = None) -> str:
    settings = settings or Settings()
    table = rows(results, settings)
    per_job = results["per_job"]
    stored = results.get("scaling", {}).get("stored", [])
    largest = stored[-1] if stored else None
    head = "| | " + " | ".join(f"{r['rate']:,} jobs/s" for r in table) + " |"
    lines = [
        "# Capacity: what 1k, 10k and 50k jobs/s need",
        "",
        f"Rendered by `python -m bench.capacity` from bench/results.json (profile "
        f"`{results.get('profile')}`, run {results.get('date')}). Every figure is a measured "
        "per-job unit of that run times the rate; re-render after the next bench. Bold: over "
        "a limit of one partition key, one queue or the account's default quota.",
        "",
        "Assumptions: every job immediate and admitted through the API, all from ONE tenant "
        "(the worst case for its keys), job state events as deployed, worker Lambda batches "
        f"of {LAMBDA_BATCH} taking the measured {per_job['worker_seconds_per_job']} s per "
        f"no-op job; `LEASEHOLD_SHARDS` = {settings.shards}, `LEASEHOLD_TENANT_SHARDS` = "
        f"{settings.tenant_shards}, admission items as the tenant's rate needs "
        f"({JOBS_PER_SHARD} jobs/s each, at least {SPREAD}). DynamoDB: "
        f"~{PARTITION_WRITE_UNITS:,} write units/s per partition key; on-demand tables "
        "double their peak as they grow (pre-warm a new "
        "table for a launch at these rates).",
        "",
        head,
        "|---" * (len(table) + 1) + "|",
    ]

    def line(name: str, cells: list[str]) -> None:
        lines.append(f"| {name} | " + " | ".join(cells) + " |")

    line("jobs table write units/s (keyed by home: one tenant's spread over its shards)",
         [_n(r["jobs_table_write_units"]) for r in table])
    line("jobs table partitions needed", [_count(r["jobs_table_partitions"]) for r in table])
    line(f"`leases` index: units/s per shard key ({settings.shards} shards)",
         [_flag(r["leases_units_per_shard_key"], PARTITION_WRITE_UNITS) for r in table])
    line("`leases` shards needed", [_count(r["leases_shards_needed"]) for r in table])
    line(f"one tenant's homes: units/s per home ({settings.tenant_shards} shards)",
         [_flag(r["tenant_index_units_per_shard_key"], PARTITION_WRITE_UNITS)
          for r in table])
    line("one tenant's shards needed", [_count(r["tenant_index_shards_needed"])
                                        for r in table])
    line("tenant admission items (shards)", [_count(r["admission_shards"]) for r in table])
    line("admission: units/s per item",
         [_flag(r["admission_units_per_shard_key"], PARTITION_WRITE_UNITS) for r in table])
    line("SQS requests/s (standard queues: no throughput limit)",
         [_n(r["sqs_requests_per_second"]) for r in table])
    line("SQS messages in flight (one queue)",
         [_flag(r["sqs_in_flight"], SQS_IN_FLIGHT) for r in table])
    line("worker Lambda concurrency",
         [_flag(r["lambda_concurrency"], LAMBDA_CONCURRENCY) for r in table])
    line("EventBridge PutEvents entries/s",
         [_flag(r["eventbridge_entries_per_second"], EVENTBRIDGE_ENTRIES) for r in table])
    line("monthly cost, USD (no API Gateway)", [f"${r['monthly_cost']:,.0f}" for r in table])
    lines += ["", "## Where the limits are", ""]
    if largest:
        lines.append(
            f"- Ticker and sweeper: one pass over {largest['stored_jobs']:,} stored jobs read "
            f"{largest['ticker']['read_units']:g} / {largest['sweeper']['read_units']:g} units "
            f"in {largest['ticker']['queries']:g} / {largest['sweeper']['queries']:g} queries: "
            "a pass costs what it finds (sparse indexes), not what is stored; at these rates "
            "each pass finds only the due and the expired, so its load grows with failures "
            "and delayed jobs, one query per shard plus one page per 1 MB found.")
    lines += [
        "- The `leases` index is the first hot key: its key moves on every lease and "
        "heartbeat, spread over only `LEASEHOLD_SHARDS` keys. Raising the shard count lifts "
        "it (the sweeper then queries more shards per pass); cutting its writes per job "
        "(another part of issue 13) lifts it for free.",
        "- One tenant: its rows live in its homes, one per shard (the jobs table is keyed by "
        "home, so a plain job writes no listing index entry), each taking every write of its "
        f"rows: ~{PARTITION_WRITE_UNITS // INDEX_UNITS_PER_JOB:,} jobs/s per shard "
        f"({settings.tenant_shards} shards by default: "
        f"{settings.tenant_shards * PARTITION_WRITE_UNITS // INDEX_UNITS_PER_JOB:,} jobs/s), "
        f"its admission ~{PARTITION_WRITE_UNITS // ADMISSION_UNITS_PER_JOB} jobs/s per item "
        "(split as its rate needs). Above that from one tenant, raise "
        "`LEASEHOLD_TENANT_SHARDS` (up to 1,024; listing pages then query more shards).",
        "- Lambda: the account's default 1,000 concurrent executions; SQS: 120,000 messages "
        "in flight per standard queue (more pools or priorities split it).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    source = Path(argv[0]) if argv else ROOT / "bench" / "results.json"
    target = Path(argv[1]) if len(argv) > 1 else ROOT / "docs" / "capacity.md"
    target.write_text(markdown(json.loads(source.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
