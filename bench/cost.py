"""Cost per million jobs from the measured requests, units and worker time, at public prices.

Only the prices (and the stated shape of each alternative) are inputs; every quantity of
Leasehold comes from this run.
"""

from __future__ import annotations

from typing import Any

#: us-east-1 on-demand prices in dollars (public price pages). The first five are the issue's.
PRICES = {
    "dynamodb_per_million_write_units": 0.625,
    "dynamodb_per_million_read_units": 0.125,
    "sqs_per_million_requests": 0.40,
    "lambda_per_million_requests": 0.20,
    "api_gateway_rest_per_million": 3.50,
    "step_functions_standard_per_million_transitions": 25.0,
    "temporal_cloud_per_million_actions": 25.0,
    # Not in the issue; from the AWS price pages (us-east-1, no free tier).
    "lambda_arm64_per_gb_second": 0.0000133334,
    "eventbridge_scheduler_per_million_invocations": 1.00,
    "eventbridge_per_million_custom_events": 1.00,
}
#: The stack's defaults (infra/config.py): worker and API memory, and the SQS batch size.
WORKER_MEMORY_GB = 1.0
API_MEMORY_GB = 0.5
HOUSEKEEPING_MEMORY_GB = 0.5
LAMBDA_BATCH = 10
#: The smallest Lambda bill for a no-op job in the alternatives: 1 ms at 128 MB.
NOOP_LAMBDA_GB_SECONDS = 0.001 * 0.125
PASSES_PER_MONTH = 60 * 24 * 30


def _lambda(invocations: float, gb_seconds: float) -> float:
    return (invocations * PRICES["lambda_per_million_requests"]
            + gb_seconds * 1e6 * PRICES["lambda_arm64_per_gb_second"])


def leasehold(per_job: dict[str, Any], worker_seconds: float) -> dict[str, float]:
    """Dollars per million jobs of one kind, by service (no API Gateway)."""
    dynamodb = (per_job["write_units"] * PRICES["dynamodb_per_million_write_units"]
                + per_job["read_units"] * PRICES["dynamodb_per_million_read_units"])
    sqs = per_job["sqs_requests"] * PRICES["sqs_per_million_requests"]
    # EventBridge bills each published entry (each event is well under 64 KB), not requests:
    # batching entries into requests of 10 does not change this line.
    entries = per_job.get("eventbridge_entries", per_job["eventbridge_requests"])
    events = entries * PRICES["eventbridge_per_million_custom_events"]
    worker = _lambda(1 / LAMBDA_BATCH, worker_seconds * WORKER_MEMORY_GB)
    return {"dynamodb": round(dynamodb, 3), "sqs": round(sqs, 3),
            "eventbridge": round(events, 3), "lambda_worker": round(worker, 3),
            "total": round(dynamodb + sqs + events + worker, 3)}


def model(per_job: dict[str, Any], scaling: list[dict[str, Any]]) -> dict[str, Any]:
    worker_seconds = float(per_job["worker_seconds_per_job"])
    api_seconds = float(per_job["api_seconds_per_request"])
    kinds = {kind: leasehold(per_job[kind], worker_seconds)
             for kind in ("immediate", "delayed", "retried", "cron_occurrence")}
    if "immediate_publish_all" in per_job:  # what LEASEHOLD_PUBLISH=all would cost
        kinds["immediate_publish_all"] = leasehold(per_job["immediate_publish_all"],
                                                   worker_seconds)
    via_api = leasehold(per_job["immediate_via_api"], worker_seconds)
    api_gateway = PRICES["api_gateway_rest_per_million"]
    api_lambda = _lambda(1, api_seconds * API_MEMORY_GB)
    via_api.update({"api_gateway": api_gateway, "lambda_api": round(api_lambda, 3),
                    "total": round(via_api["total"] + api_gateway + api_lambda, 3)})
    kinds["immediate_via_api"] = via_api

    # Fixed per month, whatever the job count: one ticker and one sweeper pass a minute.
    smallest = scaling[0] if scaling else None
    fixed = None
    if smallest is not None:
        reads = smallest["ticker"]["read_units"] + smallest["sweeper"]["read_units"]
        fixed = round(PASSES_PER_MONTH * reads / 1e6 * PRICES["dynamodb_per_million_read_units"]
                      + 2 * PASSES_PER_MONTH / 1e6 * PRICES["lambda_per_million_requests"], 3)

    noop_lambda = _lambda(1, NOOP_LAMBDA_GB_SECONDS)
    alternatives = {
        "EventBridge Scheduler + Lambda": round(
            PRICES["eventbridge_scheduler_per_million_invocations"] + noop_lambda, 3),
        "Step Functions Standard (2 transitions) + Lambda": round(
            2 * PRICES["step_functions_standard_per_million_transitions"] + noop_lambda, 3),
        "Temporal Cloud (2 actions; workers not counted)": round(
            2 * PRICES["temporal_cloud_per_million_actions"], 3),
    }
    return {
        "prices": PRICES,
        "assumptions": [
            "Leasehold: measured write/read units, SQS requests and job state events "
            "(as the stack publishes them: terminal states only, billed per event entry; "
            "'immediate_publish_all' publishes every state) per job (section 4); the "
            "worker Lambda runs batches of 10 (one invocation per 10 jobs) at 1 GB arm64 for "
            "the measured worker time per job against the local emulator; no API Gateway "
            "unless named.",
            "The API path adds API Gateway REST and one API Lambda invocation (512 MB, "
            "measured handler time).",
            "Fixed per month: one ticker and one sweeper pass a minute (43,200 each), at the "
            "read units measured per pass with the smallest stored-jobs size.",
            "Alternatives run the same no-op job: EventBridge Scheduler one-time schedule "
            "($1.00/M) + a Lambda billed 1 ms at 128 MB; Step Functions Standard with one Task "
            "state counted as 2 transitions + the Lambda; Temporal Cloud counted as 2 actions "
            "(workflow start, activity) with self-hosted workers not priced.",
            "No free tiers.",
        ],
        "per_million_jobs": kinds,
        "fixed_per_month": fixed,
        "alternatives_per_million_jobs": alternatives,
    }


#: DynamoDB's least units per request of each kind (items under 1 KB written, 4 KB read):
#: what a request whose item sizes this count does not see costs at the least. A transaction
#: writes 2 units per item; one that is cancelled (a conflict) is billed as if it had landed
#: (an assumption: AWS bills cancelled transactions' capacity, not documented per case).
READ_UNITS_PER_REQUEST = {"GetItem": 1.0, "Query": 0.5, "BatchGetItem": 1.0, "Scan": 0.5}
TRANSACTION_ITEMS = 2


def under_concurrency(front_door: dict[str, Any], per_job: dict[str, Any]
                      ) -> dict[str, Any]:
    """Dollars per million jobs from the requests per job counted under concurrency
    (bench.front_door), by substrate and workload, at the prices above.

    The counts are whole-runtime requests by operation (no item sizes), so units come from
    the one-at-a-time metering (section 4): each plain write (put, update, delete) costs
    the write units that metering measured per plain write of the same path, each
    transaction 2 units per item, each read the least units of its kind. Every SQS request
    is billed (empty receives too); EventBridge and the worker Lambda as in :func:`model`;
    via the API every attempt, refused ones too, is an API Gateway request and an API Lambda
    invocation.
    """
    worker_seconds = float(per_job["worker_seconds_per_job"])
    api_seconds = float(per_job["api_seconds_per_request"])
    out: dict[str, Any] = {}
    for substrate, measured in front_door.items():
        rows: dict[str, Any] = {}
        runs = [(f"via the API, {run['clients']} clients", run, "immediate_via_api")
                for run in measured.get("api", [])]
        if "library" in measured:
            runs.append((f"via the library, {measured['library']['clients']} threads",
                         measured["library"], "immediate"))
        for label, run, kind in runs:
            rows[label] = _concurrent_cost(run, per_job[kind], worker_seconds, api_seconds,
                                           via_api=run.get("via") != "library")
        out[substrate] = rows
    return out


def _plain_writes(operations: dict[str, float], prefix: str) -> float:
    return sum(n for op, n in operations.items()
               if op.split(prefix, 1)[-1] in ("PutItem", "UpdateItem", "DeleteItem"))


def _concurrent_cost(run: dict[str, Any], metered: dict[str, Any], worker_seconds: float,
                     api_seconds: float, *, via_api: bool) -> dict[str, float]:
    ops = run["requests_by_operation"]  # "dynamodb UpdateItem": per job
    metered_writes = _plain_writes(metered["requests_by_operation"], "dynamodb.")
    units_per_write = (metered["write_units"] / metered_writes) if metered_writes else 1.0
    write_units = (_plain_writes(ops, "dynamodb ") * units_per_write
                   + ops.get("dynamodb TransactWriteItems", 0) * 2 * TRANSACTION_ITEMS)
    read_units = sum(ops.get(f"dynamodb {op}", 0) * units
                     for op, units in READ_UNITS_PER_REQUEST.items())
    dynamodb = (write_units * PRICES["dynamodb_per_million_write_units"]
                + read_units * PRICES["dynamodb_per_million_read_units"])
    sqs = sum(n for op, n in ops.items() if op.startswith("sqs ")) \
        * PRICES["sqs_per_million_requests"]
    events = metered.get("eventbridge_entries", 0) * PRICES["eventbridge_per_million_custom_events"]
    worker = _lambda(1 / LAMBDA_BATCH, worker_seconds * WORKER_MEMORY_GB)
    attempts = 1 + run.get("refused", 0) / run["jobs"] if via_api else 0.0
    gateway = attempts * PRICES["api_gateway_rest_per_million"]
    api = _lambda(attempts, attempts * api_seconds * API_MEMORY_GB) if via_api else 0.0
    return {"requests_per_job": run["requests_per_job"], "write_units": round(write_units, 2),
            "read_units": round(read_units, 2), "dynamodb": round(dynamodb, 3),
            "sqs": round(sqs, 3), "eventbridge": round(events, 3),
            "lambda": round(worker + api, 3), "api_gateway": round(gateway, 3),
            "total": round(dynamodb + sqs + events + worker + api + gateway, 3)}
#: DynamoDB Standard table storage and continuous backups (PITR, on in the stack), us-east-1.
STORAGE_PRICES = {"dynamodb_storage_per_gb_month": 0.25,
                  "dynamodb_pitr_per_gb_month": 0.20}
#: DynamoDB bills 100 bytes of overhead per item, in the table and in each index holding it.
ITEM_OVERHEAD_BYTES = 100
#: A by_tenant_shard index entry (KEYS_ONLY): job_id, pk, tenant_shard and created_at. Only
#: a derived id carries one (issue 46: a plain job is listed from its home, no entry).
LISTING_ENTRY_BYTES = 37 + 13 + 20 + 8


def storage(per_job: dict[str, Any], retention_days: int = 30) -> dict[str, Any]:
    """Storage of a million finished jobs, from the measured write units: every write of the
    row cost one unit, so the row is at most 1 KB (an upper bound, not a measurement).

    Without retention a month's million jobs are billed every month from then on (the
    table grows by that much a month, without end); with it, each row is billed for about
    its retention (DynamoDB deletes within a few days of the TTL: +2 days assumed).
    """
    writes = per_job["dynamodb_requests_by_table"]
    row_writes = sum(n for name, n in writes.items() if name.endswith(" jobs"))
    row_bytes = 1024 * per_job["write_units_by_table"]["jobs"] / row_writes
    listing = per_job["write_units_by_table"].get("jobs/by_tenant_shard", 0.0)
    per_job_bytes = row_bytes + ITEM_OVERHEAD_BYTES + \
        listing * (LISTING_ENTRY_BYTES + ITEM_OVERHEAD_BYTES)
    gb = 1e6 * per_job_bytes / 1e9
    per_gb_month = sum(STORAGE_PRICES.values())
    monthly = gb * per_gb_month
    kept_months = (retention_days + 2) / 30
    return {
        "bytes_per_job_at_most": round(per_job_bytes),
        "gb_per_million_jobs": round(gb, 2),
        "without_retention_per_month_per_million_stored": round(monthly, 3),
        "without_retention_after_a_year_of_1m_a_day": round(monthly * 365, 2),
        "with_retention_per_million_jobs": round(monthly * kept_months, 3),
        "with_retention_steady_at_1m_a_day": round(monthly * 30 * kept_months, 2),
        "retention_days": retention_days,
    }
