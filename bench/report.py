"""The BENCHMARKS.md page from a run's results. The targets it judges are
:mod:`bench.report_targets`; its longer sections and table helpers :mod:`bench.report_sections`."""

from __future__ import annotations

from typing import Any

from bench import durable, flow, front_door_report, option_cost, relay_cost
from bench.report_sections import (
    client_lines,
    fairness_lines,
    idle_section,
    lateness_table,
    misses,
    operations,
    storage,
    sweep_index,
    table_row,
    tick_lines,
)
from bench.report_targets import targets

MB = 1024 * 1024

#: The figures before issue 13, shown beside this run's.
BEFORE_ISSUE_13 = {
    "throughput vs floor (library)": "0.49",
    "throughput vs floor (HTTP API)": "0.41",
    "requests per immediate no-op job": "7.2",
    "write units per immediate no-op job": "8",
    "cost per million immediate jobs (no API Gateway)": "$9.26",
    "API handler cold start (import, wall)": "702 ms",
    "idle AWS requests per second of `leasehold dev`": "26.8",
    "one tenant's sustained submit rate (paper, sharded keys)": "~1,000 writes/s (one key)",
}


def markdown(r: dict[str, Any]) -> str:
    m = r["machine"]
    loads = r["load"]["at_sections"]
    all_loads = [v[0] for v in loads.values()]
    lines = [
        "# Benchmarks",
        "",
        "Measured by `make bench` (`python -m bench.run`); every number below comes from the "
        "run recorded in `bench/results.json`, except the public prices in the cost section. "
        "Everything runs on one machine: the local runtime (`leasehold dev`: moto server, "
        "worker processes, API) and the benchmark client share its cores, so absolute rates "
        "are the emulator's, not AWS's.",
        "",
        f"- Date: {r['date']}; profile `{r['profile']}`; run took {r['duration_seconds']:.0f} s",
        f"- Machine: {m['cores']} cores, {m['memory_gib']} GiB, Python {m['python']}, "
        f"{m['platform']}",
        f"- Load average (1 min) at the start of each section: {min(all_loads):.1f} to "
        f"{max(all_loads):.1f} (other work shared the machine; see `load` in the JSON)",
        "",
        "## Targets",
        "",
        table_row("target", "before issue 13", "goal", "measured", "verdict"),
        table_row("---", "---", "---", "---", "---"),
    ]
    for t in r["targets"]:
        before = next((v for k, v in BEFORE_ISSUE_13.items() if t["name"].startswith(k)), "")
        if t["name"].startswith("quiet tenant"):
            before = "not measured"
        lines.append(table_row(t["name"], before, t["target"], t["measured"],
                          "met" if t["met"] else "**MISSED**"))
    lines += misses(r)
    lines += front_door_report.targets_table(r)

    floor = r["throughput"]["floor"]
    lines += [
        "",
        "## 1. Throughput (no-op jobs, end to end)",
        "",
        f"Jobs submitted from {throughput_threads(r)} client threads, from the first submission "
        "to the last job's `finished_at`. Workers poll batches of 10 with 4 threads each. "
        f"Floor: {floor['jobs']} jobs' worth of bare calls on a fresh emulator "
        "(per job: 1 conditional put, 1 send, 2 conditional updates; per 10 jobs: "
        f"1 receive, 1 batched delete) from {floor['client_threads']} threads: "
        f"**{floor['jobs_per_second']} jobs/s**.",
        "",
        table_row("worker processes", "library jobs/s", "ratio to floor", "HTTP API jobs/s",
             "ratio to floor", "jobs per run"),
        table_row("---", "---", "---", "---", "---", "---"),
    ]
    for run in sorted(r["throughput"]["runs"], key=lambda x: x["workers"]):
        lines.append(table_row(run["workers"], run["library"]["jobs_per_second"],
                          f"{run['ratio_library']:.2f}", run["http"]["jobs_per_second"],
                          f"{run['ratio_http']:.2f}", run["library"]["jobs"]))

    q, p = r["queue_wait"], r["precision"]
    lines += [
        "",
        "## 2. Queue wait at 50% of capacity",
        "",
        f"{q['workers']} worker processes, capacity {q['capacity_jobs_per_second']} jobs/s "
        f"(section 1), submitted at {q['achieved_rate']} jobs/s for {q['seconds']:g} s; "
        "wait = `started_at - created_at` (from submission, so it includes the submission's "
        "own writes).",
        "",
        table_row("jobs", "p50", "p99", "max"),
        table_row("---", "---", "---", "---"),
        table_row(q["count"], f"{q['p50_s']:.3f} s", f"{q['p99_s']:.3f} s", f"{q['max_s']:.3f} s"),
        *client_lines(r.get("client_result")),
        *fairness_lines(r),
        "",
        "## 3. Timing precision (start lateness = `first_started_at - run_at`)",
        "",
        f"Delayed jobs (delays {p['delays_s'][0]:g}-{p['delays_s'][1]:g} s with millisecond "
        "parts) and a `rate(2 seconds)` schedule, "
        f"together for {p['seconds']:g} s; the local ticker runs every second. Negative "
        "lateness is an early start.",
        "",
    ]
    lines += lateness_table("kind", p)
    lines += tick_lines(p)

    pj = r["per_job"]
    lines += [
        "",
        "## 4. AWS requests and DynamoDB capacity units per job",
        "",
        "Counted with botocore `after-call` hooks on the app's clients over batches of 10 jobs "
        "through the real paths, with job state events published to an EventBridge bus as "
        "deployed (receives counted only when they return messages). Units are "
        "computed from item sizes, as moto reports fixed capacity: a write costs "
        "`ceil(max(size before, size after) / 1 KB)`; each GSI adds 1 write when an item "
        "enters, leaves or changes projected attributes, 2 when its index key changes, each "
        "`ceil((index keys + table key + projected attributes + 100 B) / 1 KB)`; reads "
        "`ceil(size / 4 KB)` (half when eventually consistent, index queries always).",
        "",
        table_row("job", "requests", "by operation", "write units", "by table/index",
             "read units"),
        table_row("---", "---", "---", "---", "---", "---"),
    ]
    for label, key in (("immediate", "immediate"), ("immediate via API", "immediate_via_api"),
                       ("delayed", "delayed"), ("retried once", "retried"),
                       ("cron occurrence", "cron_occurrence")):
        k = pj[key]
        lines.append(table_row(label, f"{k['requests']:g}", operations(k["requests_by_operation"]),
                          f"{k['write_units']:g}",
                          ", ".join(f"{t} {n:g}" for t, n in k["write_units_by_table"].items()),
                          f"{k['read_units']:g}"))
    for label, key in (("Immediate job", "immediate"), ("Via the API", "immediate_via_api")):
        kind = pj[key]
        tables = kind.get("dynamodb_requests_by_table", {})
        tenant_requests = sum(n for name, n in tables.items() if name.endswith(" tenants"))
        tenant_units = kind["write_units_by_table"].get("tenants", 0)
        line = (f"{label}, DynamoDB requests by table: "
                + ", ".join(f"{name} {n:g}" for name, n in tables.items()) + ".")
        if tenant_requests:
            line += (f" The `tenants` writes ({tenant_requests:g} requests, {tenant_units:g} "
                     "write units) keep the tenant's live-job slots and outcome counts "
                     "(back-pressure); without them the job would take "
                     f"{kind['requests'] - tenant_requests:g} requests and "
                     f"{kind['write_units'] - tenant_units:g} write units.")
        lines += ["", line]
    events = pj["immediate"].get("eventbridge_requests", 0)
    if events:
        lines += ["", f"Job state events (the stack sets `LEASEHOLD_EVENT_BUS`) cost an immediate "
                      f"job {events:g} PutEvents requests; without them it would take "
                      f"{pj['immediate']['requests'] - events:g} requests."]
    if "immediate_publish_all" in pj:
        every = pj["immediate_publish_all"]
        dollars = r["cost"]["per_million_jobs"].get("immediate_publish_all", {})
        lines += ["", f"As deployed only terminal states are published "
                      f"({pj['immediate'].get('eventbridge_entries', 0):g} event per immediate "
                      f"job, batched 10 to a PutEvents request). Publishing every state "
                      f"(`LEASEHOLD_PUBLISH=all`) takes {every['requests']:g} requests and "
                      f"{every.get('eventbridge_entries', 0):g} events per job"
                      + (f", ${dollars.get('total', 0):.2f} per million jobs "
                         f"(${dollars.get('eventbridge', 0):.2f} of it EventBridge)."
                         if dollars else ".")]
    lines += [
        "",
        f"A cron occurrence excludes the ticker's fixed queries (an empty tick: "
        f"{pj['empty_tick']['requests']:g} queries, {pj['empty_tick']['read_units']:g} read "
        "units, see section 6).",
    ]
    lines += sweep_index(r.get("sweep_index") or [])

    c = r["cost"]
    lines += [
        "",
        "## 5. Cost per million jobs (us-east-1 on-demand)",
        "",
        table_row("workload", "DynamoDB", "SQS", "EventBridge", "Lambda", "API Gateway", "total"),
        table_row("---", "---", "---", "---", "---", "---", "---"),
    ]
    for label, key in (("Leasehold immediate", "immediate"), ("Leasehold delayed", "delayed"),
                       ("Leasehold retried once", "retried"),
                       ("Leasehold cron occurrence", "cron_occurrence"),
                       ("Leasehold immediate via API", "immediate_via_api")):
        k = c["per_million_jobs"][key]
        lam = k["lambda_worker"] + k.get("lambda_api", 0)
        lines.append(table_row(label, f"${k['dynamodb']:.2f}", f"${k['sqs']:.2f}",
                          f"${k.get('eventbridge', 0):.2f}", f"${lam:.2f}",
                          f"${k.get('api_gateway', 0):.2f}", f"**${k['total']:.2f}**"))
    for label, dollars in c["alternatives_per_million_jobs"].items():
        lines.append(table_row(label, "", "", "", "", "", f"${dollars:.2f}"))
    lines += ["", f"Fixed per month (ticker and sweeper once a minute): "
                  f"${c['fixed_per_month']}." if c["fixed_per_month"] is not None else "", ""]
    lines += storage(r["per_job"]["immediate"])
    lines += ["Assumptions:", ""] + [f"- {a}" for a in c["assumptions"]]
    lines += ["", "Prices: " + ", ".join(f"{k} {v:g}" for k, v in c["prices"].items()) + "."]
    lines += front_door_report.cost_table(r)
    if r.get("relay_cost"):
        lines += relay_cost.markdown(r["relay_cost"])

    sc = r["scaling"]
    lines += [
        "",
        "## 6. Scaling",
        "",
        "One ticker pass and one sweeper pass over a jobs table holding the stored jobs "
        "(80% SUCCEEDED, 10% SCHEDULED a day ahead, 10% RUNNING with live leases, written "
        "with `batch_write_item` into moto) plus the same due work each time (10 due jobs, "
        "10 expired leases). Read units are computed as in section 4; moto's time per pass "
        "is shown because moto scans for index queries (DynamoDB does not).",
        "",
        table_row("stored jobs", "ticker read units", "ticker queries", "sweeper read units",
             "sweeper queries", "promoted / recovered", "moto seconds (tick, sweep)"),
        table_row("---", "---", "---", "---", "---", "---", "---"),
    ]
    for s in sc["stored"]:
        lines.append(table_row(f"{s['stored_jobs']:,}", f"{s['ticker']['read_units']:g}",
                          f"{s['ticker']['queries']:g}", f"{s['sweeper']['read_units']:g}",
                          f"{s['sweeper']['queries']:g}",
                          f"{s['ticker']['promoted']} / {s['sweeper']['recovered']}",
                          f"{s['ticker']['seconds_in_moto']}, "
                          f"{s['sweeper']['seconds_in_moto']}"))
    for s in sc["skipped"]:
        lines.append(table_row(f"{s['stored_jobs']:,}", "not run: " + s["reason"] +
                          f" (estimated {s['estimated_seconds']} s, "
                          f"{s['seconds_left']} s left)", "", "", "", "", ""))
    lines += [
        "",
        "Submission throughput (library, 8 threads, no workers) by shard count: "
        + ", ".join(f"{s['shards']} shards {s['submitted_per_second']} jobs/s"
                    for s in sc["submission_by_shards"])
        + ". moto has no partition limits, so this shows the code's cost of sharding only; "
          "on DynamoDB each shard of the `sweep` and `due` indexes is one partition key "
          "(about 1,000 writes/s).",
    ]
    for t in sc.get("one_tenant", []):
        if "submitted_per_second" not in t:  # the tiny profile: paper limits only
            lines.append(f"\nOne tenant, {t['admission_shards']} admission item(s) and "
                         f"{t['index_shards']} tenant shard(s): on DynamoDB by design at most "
                         f"**{t['jobs_per_second']:,} jobs/s** (bound by the {t['bound_by']}).")
            continue
        lines.append(
            f"\nOne tenant through admission, {t['admission_shards']} admission item(s) and "
            f"{t['index_shards']} tenant shard(s) (homes): {t['submitted_per_second']} "
            f"jobs/s in moto ({t['refused_by_contention_per_job']} contention refusals per "
            f"job, newest 50 listed in {t['list_50_seconds']} s); on DynamoDB by design at "
            f"most **{t['jobs_per_second']:,} jobs/s** (bound by the {t['bound_by']}).")

    imp, asset = r["cold_start"]["imports"], r["cold_start"]["asset"]
    lines += [
        "",
        "## 7. Cold start",
        "",
        f"Median over {imp['runs']} fresh interpreters of `import leasehold.handlers.<name>` "
        f"minus a bare interpreter ({imp['bare_interpreter_ms']} ms).",
        "",
        table_row("handler", "import wall ms", "import CPU ms"),
        table_row("---", "---", "---"),
    ]
    for name, wall in imp["wall_ms"].items():
        lines.append(table_row(name, wall, imp["cpu_ms"][name]))
    if "api_primed_ms" in imp:
        lines.append(table_row("api + prime() (its first request's build)",
                          imp["api_primed_ms"]["wall"], imp["api_primed_ms"]["cpu"]))
    how = {"infra": "the CDK construct's own bundler (`leasehold.cdk.code.LocalBundler`: pip "
                    "for manylinux aarch64)",
           "venv": "the runtime dependencies as installed in `.venv` (no network)",
           }.get(asset["method"], "nothing (not measured in this profile)")
    lines += [
        "",
        f"Code asset, built with {how}: {asset['unzipped_bytes'] / MB:.1f} MB unzipped, "
        f"**{asset['zipped_bytes'] / MB:.1f} MB zipped** "
        f"({asset['zipped_bytes_without_runtime_provided'] / MB:.1f} MB zipped without boto3, "
        "botocore and their dependencies, which the Lambda Python runtime provides). Largest: "
        + ", ".join(f"{n} {b / MB:.1f} MB"
                    for n, b in asset["largest_packages_unzipped_bytes"].items()) + ".",
        "",
    ]
    if "idle" in r:
        lines += idle_section(r["idle"])
    lines += front_door_report.section(r)
    lines += durable.markdown(r.get("durable"))
    lines += flow.markdown(r.get("flow"))
    # `make bench-cost`'s own section (bench/option_cost.json), kept when this page is rewritten.
    lines += option_cost.recorded_section()
    return "\n".join(lines) + "\n"


def throughput_threads(r: dict[str, Any]) -> int:
    return int(r["throughput"]["floor"]["client_threads"])


__all__ = ["markdown", "targets", "throughput_threads"]
