"""What a job costs, and what each option adds, in units DynamoDB reports (issue 32).

``python -m bench.option_cost`` (``make bench-cost``, a couple of minutes): immediate no-op
jobs, submitted through the library and run by the worker as Lambda's event source drives
it, on AWS's DynamoDB Local (SQS and EventBridge on the embedded emulator behind the same
endpoint, :mod:`bench.substrate`). Every DynamoDB request asks for
``ReturnConsumedCapacity=INDEXES`` and the units come from the answers
(:mod:`bench.consumed`); SQS and EventBridge requests are counted by
:class:`leasehold.aws.counting.RequestCounter` (receives only when they return messages, as
in :mod:`bench.per_job`). Each option's price is its scenario minus the plain job's, per
job, at list prices. Writes ``bench/option_cost.json`` and the section of BENCHMARKS.md
between its markers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.batch_front_door import API_PRICES
from bench.consumed import CapacityHook
from bench.cost import API_MEMORY_GB, _lambda
from bench.local import library_app
from bench.substrate import started
from bench.tasks import EFFECTS_TABLE
from leasehold.api.app import handle
from leasehold.api.context import ApiConfig
from leasehold.aws import provision
from leasehold.aws.clients import Clients
from leasehold.aws.counting import RequestCounter
from leasehold.aws.queues import Queues
from leasehold.core.spec import JobSpec
from leasehold.durable.callbacks import complete
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.batches import submit_many
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Worker
from leasehold.local.gateway import proxy_event
from leasehold.settings import PUBLISH_CHOICES
from leasehold.tenancy.admission import submit_admitted
from leasehold.tenancy.limits import Limits

ROOT = Path(__file__).resolve().parent.parent
#: List prices, us-east-1 on demand (the issue's).
PRICES = {"write_unit": 0.625, "read_unit": 0.125, "sqs_request": 0.40, "event": 1.00}
EVENT_BUS = "leasehold-bench-cost"
CAPPED = Limits(rate=1e6, burst=1e6, max_live=10**8, max_backlog=10**8)
UNCAPPED = Limits(rate=1e6, burst=1e6, max_live=None, max_backlog=10**8)
#: Jobs per ``POST /jobs/batch`` (the most it takes).
API_BATCH = 100
START, END = "<!-- bench-cost:start -->", "<!-- bench-cost:end -->"


@dataclass
class Meters:
    app: Leasehold
    capacity: CapacityHook
    requests: RequestCounter
    poller: Queues
    url: str
    receives: int = 0
    #: EventBridge entries published (what EventBridge bills).
    entries: int = 0

    def count_entries(self, parsed: Any, **_: Any) -> None:
        self.entries += len(parsed.get("Entries", [])) - int(parsed.get("FailedEntryCount", 0))


def _meters(app: Leasehold) -> Meters:
    poller = Queues(Clients(app.settings), app.settings)  # unmetered: receives added by hand
    meters = Meters(app, CapacityHook().attach(app.clients),
                    RequestCounter().attach(app.clients), poller, poller.url("default", "normal"))
    app.clients.client("events").meta.events.register("after-call.events.PutEvents",
                                                      meters.count_entries)
    return meters


def _run(m: Meters, expected: int, timeout: float = 60) -> None:
    got, deadline, worker = 0, time.monotonic() + timeout, Worker(m.app)
    while got < expected:
        batch = m.poller.receive(m.url, max_messages=10, wait_seconds=1, visibility_seconds=60)
        if not batch:
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {got} of {expected} messages arrived")
            continue
        m.receives += 1
        consume(worker, batch)
        got += len(batch)


def _measure(m: Meters, jobs: int, body: Callable[[str], None]) -> dict[str, Any]:
    """Per job: write and read units, SQS and EventBridge requests, events, dollars."""
    tenant = "t" + uuid.uuid4().hex[:8]
    units, counts, receives, entries = (m.capacity.snapshot(), m.requests.snapshot(),
                                        m.receives, m.entries)
    body(tenant)
    spent = m.capacity.snapshot().minus(units)
    made = m.requests.snapshot().minus(counts)
    sqs = made.total("sqs") + m.receives - receives
    out: dict[str, Any] = {
           "write_units": spent.write_units / jobs, "read_units": spent.read_units / jobs,
           "refused_writes": spent.refused_writes / jobs,
           "units_corrected": spent.corrected / jobs,
           "dynamodb_requests": made.total("dynamodb") / jobs,
           "sqs_requests": sqs / jobs, "eventbridge_requests": made.total("events") / jobs,
           "by_target": {k: round(v / jobs, 3) for k, v in sorted(spent.by_target.items())},
           "by_operation": {k: round(v / jobs, 3)
                            for k, v in sorted(spent.by_operation.items())}}
    out["events"] = (m.entries - entries) / jobs
    out["dollars_per_million"] = dollars(out)
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}


def dollars(per_job: dict[str, Any]) -> float:
    return round(per_job["write_units"] * PRICES["write_unit"]
                 + per_job["read_units"] * PRICES["read_unit"]
                 + per_job["sqs_requests"] * PRICES["sqs_request"]
                 + per_job["events"] * PRICES["event"], 3)


def measure(jobs: int = 20, *, single: bool = True) -> dict[str, Any]:
    with started("dynamodb_local") as substrate:
        # ``none``: the name of ``off`` before issue 32 (to measure an older checkout).
        off_name = "off" if "off" in PUBLISH_CHOICES else "none"
        apps = {publish: library_app(substrate.endpoint, event_bus=EVENT_BUS,
                                     publish=off_name if publish == "off" else publish)
                for publish in ("off", "terminal", "all")}
        base = apps["off"]
        provision.create_all(base.clients, base.settings)
        base.clients.client("events").create_event_bus(Name=EVENT_BUS)
        base.clients.dynamodb.create_table(
            TableName=EFFECTS_TABLE, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}])
        meters = {publish: _meters(app) for publish, app in apps.items()}

        def plain(m: Meters, **options: Any) -> Callable[[str], None]:
            def body(tenant: str) -> None:
                specs = [JobSpec(task=options.get("task", "bench.noop"),
                                 payload=options.get("payload"), tenant=tenant,
                                 **_numbered(options.get("spec", {}), i))
                         for i in range(jobs)]
                if options.get("many"):  # as a user submitting many jobs at once would
                    submit_many(m.app, specs)
                else:
                    for spec in specs:
                        submit(m.app, spec)
                _run(m, jobs * options.get("attempts", 1))
            return body

        def admitted(m: Meters, limits: Limits) -> Callable[[str], None]:
            def body(tenant: str) -> None:
                for _ in range(jobs):
                    submit_admitted(m.app, JobSpec(task="bench.noop", tenant=tenant),
                                    "default", limits)
                _run(m, jobs)
            return body

        def callback(m: Meters) -> Callable[[str], None]:
            def body(tenant: str) -> None:
                ids = [submit(m.app, JobSpec(task="bench.await", tenant=tenant)).job.job_id
                       for _ in range(jobs)]
                _run(m, jobs)  # each job waits for its callback
                for job_id in ids:
                    token = json.loads(m.app.store.get(job_id).progress_json or "{}")["token"]
                    complete(m.app, token, tenant, value="go")
                _run(m, jobs)
            return body

        off, terminal, every = meters["off"], meters["terminal"], meters["all"]
        scenarios: dict[str, tuple[Meters, Callable[[str], None]]] = {
            "plain": (off, plain(off)),
            "plain, submit_many": (off, plain(off, many=True)),
            # Before issue 32 every admitted job took a slot: the uncapped row is capped.
            "uncapped admission": (off, admitted(off, UNCAPPED if hasattr(Limits, "capped")
                                                 else CAPPED)),
            "capped admission": (off, admitted(off, CAPPED)),
            "capped admission, terminal events": (terminal, admitted(terminal, CAPPED)),
            "terminal events": (terminal, plain(terminal)),
            "all events": (every, plain(every)),
            "throttle": (off, plain(off, spec={"throttle": {
                "key": "bench", "limit": 10_000, "period_seconds": 1}})),
            "concurrency key": (off, plain(off, spec={"concurrency": {
                "key": "bench", "limit": 10_000}})),
            "unique": (off, plain(off, spec={"unique": {"key": "u{i}"}})),
            "debounce": (off, plain(off, spec={"debounce": {"key": "d{i}", "seconds": 1}})),
            "durable step": (off, plain(off, task="bench.steps", payload=1)),
            "callback": (off, callback(off)),
            "ctx.transact item": (off, plain(off, task="bench.effect")),
            # Attempt 1 raises: its error (message and traceback) is stored in the row.
            "retried once": (off, plain(off, task="bench.fail_once", attempts=2)),
        }
        for m, body in {id(m): (m, plain(m)) for m, _ in scenarios.values()}.values():
            _measure(m, jobs, body)  # warm: clients built, queue URLs cached
        measured = {name: _measure(m, jobs, body) for name, (m, body) in scenarios.items()}
        through_api = {name: api_batch(off, limits, keyed=keyed) for name, limits, keyed in (
            ("API batch of 100, no cap, no events", UNCAPPED, False),
            ("API batch of 100, no cap, with an Idempotency-Key (as Client.submit_many "
             "sends it)", UNCAPPED, True),
            ("API batch of 100, default cap, no events", Limits(), False))}
        wire = single_posts(substrate) if single else None
    return {"jobs_per_scenario": jobs, "prices_per_million": PRICES,
            "scenarios": measured, "options": option_prices(measured), "api": through_api,
            **({"single_posts": wire} if wire else {})}


#: Jobs and clients of the single-``POST /jobs`` run (the issue's "8 clients").
SINGLE_JOBS, SINGLE_CLIENTS = 200, 8


def single_posts(substrate: Any) -> dict[str, Any]:
    """One tenant's echo jobs through ``POST /jobs``, one job a request from
    :data:`SINGLE_CLIENTS` clients, to ``leasehold dev`` (2 worker processes, the default
    per-tenant limits a new user gets, its cap included) on the same DynamoDB Local: every
    AWS request the runtime makes meanwhile, counted at the substrate (the wire), per job
    (:func:`bench.front_door.api_run`)."""
    from bench.front_door import WORKERS, api_run, submit_http
    from bench.local import runtime, wait_succeeded

    with runtime(workers=WORKERS, endpoint=substrate.endpoint, limited=True) as rt:
        warm = submit_http(rt.api, 2 * WORKERS, WORKERS, "warm" + uuid.uuid4().hex[:8])
        wait_succeeded(rt.app(), warm.ids, timeout=120, poll=0.2)
        return api_run(rt, substrate, SINGLE_JOBS, SINGLE_CLIENTS)


def api_batch(m: Meters, limits: Limits, *, keyed: bool = False) -> dict[str, Any]:
    """One ``POST /jobs/batch`` of :data:`API_BATCH` jobs through the API's own handler
    (in process, on the same DynamoDB Local), run to success: the jobs' units and requests
    as :func:`_measure` counts them, plus the front door: API Gateway's request and the API
    Lambda's invocation and seconds (measured here, an upper bound), shared by the batch.
    ``keyed``: with an ``Idempotency-Key``, as ``Client.submit_many`` sends every batch (each
    item then has a key, and is put first)."""
    config = ApiConfig(trust_tenant_header=True, limits=limits)
    spent = [0.0]

    def body(tenant: str) -> None:
        headers = {"X-Leasehold-Tenant": tenant}
        if keyed:
            headers["Idempotency-Key"] = uuid.uuid4().hex
        event = proxy_event("POST", "/jobs/batch", headers,
                            json.dumps({"jobs": [{"task": "bench.noop"}] * API_BATCH}))
        start = time.perf_counter()
        answer = json.loads(handle(m.app, event, None, config)["body"])
        spent[0] = time.perf_counter() - start
        if answer.get("created") != API_BATCH:
            raise RuntimeError(f"the batch was not all created: {answer}")
        _run(m, API_BATCH)

    _measure(m, API_BATCH, body)  # warm
    row: dict[str, Any] = _measure(m, API_BATCH, body)
    lambda_dollars = _lambda(1, spent[0] * API_MEMORY_GB)
    row["api_seconds_per_batch"] = round(spent[0], 3)
    for api, price in API_PRICES.items():
        row[f"dollars_per_million_{api}"] = round(
            row["dollars_per_million"] + (price + lambda_dollars) / API_BATCH, 3)
    return row


def _numbered(spec: dict[str, Any], i: int) -> dict[str, Any]:
    """``{i}`` in an option's key made the job's own (one unique key, one debounce each)."""
    return {name: {k: (v.replace("{i}", f"{i}-{uuid.uuid4().hex[:6]}")
                       if isinstance(v, str) else v) for k, v in value.items()}
            for name, value in spec.items()}


#: Each option's price: its scenario minus the one it adds to.
OPTIONS = {
    "tenant rate token (API admission, no cap)": ("uncapped admission", "plain"),
    "live-job cap (a slot taken and given back)": ("capped admission", "uncapped admission"),
    "throttle": ("throttle", "plain"),
    "concurrency key": ("concurrency key", "plain"),
    "unique": ("unique", "plain"),
    "debounce": ("debounce", "plain"),
    "durable step": ("durable step", "plain"),
    "callback": ("callback", "plain"),
    "ctx.transact item": ("ctx.transact item", "plain"),
    "one retry (a failed attempt, an excerpt of its error in the row)": ("retried once", "plain"),
    "terminal events (events=\"terminal\")": ("terminal events", "plain"),
    "all events (events=\"all\")": ("all events", "plain"),
}


def option_prices(measured: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, (scenario, baseline) in OPTIONS.items():
        a, b = measured[scenario], measured[baseline]
        delta = {k: round(a[k] - b[k], 3) for k in (
            "write_units", "read_units", "sqs_requests", "eventbridge_requests", "events")}
        delta["dollars_per_million"] = round(a["dollars_per_million"]
                                             - b["dollars_per_million"], 3)
        out[name] = delta
    return out


def markdown(results: dict[str, Any]) -> str:
    s, o = results["scenarios"], results["options"]
    lines = [START, "## Cost per job in units DynamoDB reports (`make bench-cost`)", "",
             f"{results['jobs_per_scenario']} immediate no-op jobs per row, library path, "
             "worker as Lambda's event source drives it, on AWS's DynamoDB Local with "
             "`ReturnConsumedCapacity=INDEXES` on every request (indexes and transactions as "
             "DynamoDB counts them; a transaction's items on one table at least 2 units each, "
             "which DynamoDB Local under-reports for items of equal size). List prices: "
             "$0.625/M write units, $0.125/M read units, SQS $0.40/M requests, "
             "EventBridge $1.00/M events. No Lambda, no API Gateway.",
             "", "| per job | write units | read units | SQS requests | EventBridge "
             "requests | events | $ per million |", "|---|---|---|---|---|---|---|"]
    for name, row in s.items():
        lines.append(f"| {name} | {row['write_units']:g} | {row['read_units']:g} | "
                     f"{row['sqs_requests']:g} | {row['eventbridge_requests']:g} | "
                     f"{row['events']:g} | ${row['dollars_per_million']:.2f} |")
    lines += ["", "Each option's own price (its row minus the row it adds to):", "",
              "| option | write units | read units | SQS requests | events | $ per million |",
              "|---|---|---|---|---|---|"]
    for name, row in o.items():
        lines.append(f"| {name} | {row['write_units']:+g} | {row['read_units']:+g} | "
                     f"{row['sqs_requests']:+g} | {row['events']:+g} | "
                     f"${row['dollars_per_million']:+.2f} |")
    if results.get("api"):
        lines += ["", f"Through the API: one `POST /jobs/batch` of {API_BATCH} jobs through the "
                  "API's handler (in process, same DynamoDB Local), run to success; the front "
                  "door is API Gateway's request plus the API Lambda's invocation and measured "
                  "seconds at 512 MB, shared by the batch:", "",
                  "| per job | write units | DynamoDB requests | SQS requests | AWS requests "
                  "| $ per million (no API) | with REST API | with HTTP API |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, row in results["api"].items():
            aws = row["dynamodb_requests"] + row["sqs_requests"] + row["eventbridge_requests"]
            lines.append(f"| {name} | {row['write_units']:g} | {row['dynamodb_requests']:g} | "
                         f"{row['sqs_requests']:g} | {aws:.3g} | "
                         f"${row['dollars_per_million']:.2f} | "
                         f"${row['dollars_per_million_rest']:.2f} | "
                         f"${row['dollars_per_million_http']:.2f} |")
    wire = results.get("single_posts")
    if wire:
        lines += ["", f"Single submissions: {wire['jobs']} echo jobs, one `POST /jobs` each, "
                  f"from {wire['clients']} clients of one tenant to `leasehold dev` (2 worker "
                  "processes, the default per-tenant limits, its live-job cap included) on "
                  "the same DynamoDB Local; every AWS request the runtime made meanwhile, "
                  "counted at the substrate, per job:", "",
                  "| per job | AWS requests | transactions | by operation |", "|---|---|---|---|",
                  f"| single `POST /jobs`, {wire['clients']} clients | "
                  f"{wire['requests_per_job']:g} | {wire['transactions_per_job']:g} | "
                  + ", ".join(f"{op} {n:g}" for op, n in wire["requests_by_operation"].items())
                  + " |"]
    lines += targets(results)
    lines.append(END)
    return "\n".join(lines) + "\n"


def targets(results: dict[str, Any]) -> list[str]:
    """Issue 46's targets this run measures, each with its verdict."""
    s, api = results["scenarios"], results.get("api", {})
    rows: list[tuple[str, str, float | None, float]] = [
        ("write units, plain library job", "<=", s["plain"]["write_units"], 3.4),
        ("$ per million, plain library job (`submit`, one at a time)", "<=",
         s["plain"]["dollars_per_million"], 2.40),
        ("$ per million, plain library job (`submit_many`)", "<=",
         s.get("plain, submit_many", {}).get("dollars_per_million"), 2.40),
        ("extra write units per retry", "<=", round(
            s["retried once"]["write_units"] - s["plain"]["write_units"], 3), 2.5)]
    batch = api.get("API batch of 100, no cap, no events")
    if batch:
        rows += [("$ per million via the API, batches of 100, no cap (HTTP API)", "<=",
                  batch["dollars_per_million_http"], 2.60),
                 ("AWS requests per job, batches of 100", "<=", round(
                     batch["dynamodb_requests"] + batch["sqs_requests"]
                     + batch["eventbridge_requests"], 3), 3.2)]
    wire = results.get("single_posts")
    if wire:
        rows.append(("AWS requests per job, single `POST /jobs`, 8 clients", "<=",
                     wire["requests_per_job"], 4.0))
    out = ["", "Issue 46's targets measured here:", "",
           "| measure | target | measured | verdict |", "|---|---|---|---|"]
    for name, sense, got, goal in rows:
        verdict = "not measured" if got is None else "met" if got <= goal else "**MISSED**"
        shown = "" if got is None else f"{got:g}"
        out.append(f"| {name} | {sense} {goal:g} | {shown} | {verdict} |")
    return out


def recorded_section(path: Path = ROOT / "bench" / "option_cost.json") -> list[str]:
    """The section of the last ``make bench-cost`` run, for a rewritten BENCHMARKS.md."""
    if not path.exists():
        return []
    return ["", *markdown(json.loads(path.read_text())).rstrip("\n").split("\n")]


def write_section(path: Path, section: str) -> None:
    text = path.read_text() if path.exists() else ""
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + section.rstrip("\n") + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.option_cost")
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--no-single", action="store_true",
                        help="skip the single-POST /jobs run (it starts `leasehold dev`)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "option_cost.json")
    parser.add_argument("--markdown", type=Path, default=ROOT / "BENCHMARKS.md")
    args = parser.parse_args(argv)
    results = measure(args.jobs, single=not args.no_single)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    section = markdown(results)
    write_section(args.markdown, section)
    print(section, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
