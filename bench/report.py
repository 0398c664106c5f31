"""The targets of issue 7 judged against a run's results, and the BENCHMARKS.md page."""

from __future__ import annotations

from typing import Any

from bench import cost, durable, flow, front_door_report, option_cost, relay_cost

MB = 1024 * 1024


def _target(name: str, target: str, measured: str, met: bool) -> dict[str, Any]:
    return {"name": name, "target": target, "measured": measured, "met": bool(met)}


#: What issue 13 measured before its work (its "today" column), by target name.
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


def _tick_lines(p: dict[str, Any]) -> list[str]:
    """Section 3 again with the emulator's delayed messages released on a 1 s tick."""
    t = p.get("on_a_tick")
    if t is None:
        return ["", "moto releases a delayed message within milliseconds of its due time, so "
                "these figures are its clock as much as ours. `make bench` also measures them "
                "with the emulator releasing delayed messages on a 1 s tick "
                "(`LEASEHOLD_SQS_DELAY_TICK`, as LocalStack does); this run did not."]
    lines = [
        "",
        f"The same again in a runtime whose emulator releases delayed SQS messages on a "
        f"{t['sqs_delay_tick_s']:g} s tick (`LEASEHOLD_SQS_DELAY_TICK`), as LocalStack does: "
        "moto releases each within milliseconds of its due time, so the figures above are "
        "its clock as much as ours. AWS does not document its own precision: neither figure "
        "is a promise for AWS.",
        "",
    ]
    return lines + _lateness_table("kind (1 s tick)", t)


def _lateness_table(first: str, p: dict[str, Any]) -> list[str]:
    """Start lateness of the delayed jobs and the 2 s schedule, one row each."""
    lines = [_row(first, "jobs", "p50", "p99", "min", "max", "started early"),
             _row("---", "---", "---", "---", "---", "---", "---")]
    for label, key in (("delayed", "delayed"), ("schedule every 2 s", "cron_every_2s")):
        s = p[key]
        lines.append(_row(label, s["count"], f"{s['p50_s']:.3f} s", f"{s['p99_s']:.3f} s",
                          f"{s['min_s']:.3f} s" if s["min_s"] is not None else "-",
                          f"{s['max_s']:.3f} s" if s["max_s"] is not None else "-",
                          s["early"]))
    return lines


def targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    runs = r["throughput"]["runs"]
    best = max(runs, key=lambda run: run["ratio_library"])
    best_http = max(runs, key=lambda run: run["ratio_http"])
    queue = r["queue_wait"]
    delayed, cron = r["precision"]["delayed"], r["precision"]["cron_every_2s"]
    immediate = r["per_job"]["immediate"]
    cost_immediate = r["cost"]["per_million_jobs"]["immediate"]["total"]
    stored = r["scaling"]["stored"]
    tick_units = {s["ticker"]["read_units"] for s in stored}
    sweep_units = {s["sweeper"]["read_units"] for s in stored}
    imports = r["cold_start"]["imports"]["wall_ms"]
    slowest = max(imports, key=lambda name: imports[name])
    primed = r["cold_start"]["imports"].get("api_primed_ms")
    api = "api" if "api" in imports else slowest  # the tiny profile imports the worker only
    zipped = r["cold_start"]["asset"]["zipped_bytes"]

    def lateness_ok(part: dict[str, Any]) -> bool:
        return part["count"] > 0 and part["p99_s"] <= 1.5

    found = [
        _target("throughput vs floor (library)", ">= 0.8",
                f"{best['ratio_library']:.2f} ({best['workers']} workers)",
                best["ratio_library"] >= 0.8),
        _target("throughput vs floor (HTTP API)", ">= 0.6",
                f"{best_http['ratio_http']:.2f} ({best_http['workers']} workers)",
                best_http["ratio_http"] >= 0.6),
        _target("queue wait p99 at 50% capacity", "<= 1 s", f"{queue['p99_s']:.3f} s",
                queue["p99_s"] <= 1.0),
        *_fairness_targets(r),
        _target("delayed job start lateness p99", "<= 1.5 s", f"{delayed['p99_s']:.3f} s",
                lateness_ok(delayed)),
        _target("2 s schedule start lateness p99", "<= 1.5 s", f"{cron['p99_s']:.3f} s",
                lateness_ok(cron)),
        _target("requests per immediate no-op job", "<= 5", f"{immediate['requests']:g}",
                immediate["requests"] <= 5),
        _target("write units per immediate no-op job", "<= 8",
                f"{immediate['write_units']:g}", immediate["write_units"] <= 8),
        _target("cost per million immediate jobs (no API Gateway)", "<= $5",
                f"${cost_immediate:.2f}", cost_immediate <= 5),
        _target("ticker/sweeper read units flat in stored jobs", "flat",
                f"ticker {sorted(tick_units)}, sweeper {sorted(sweep_units)} over "
                f"{', '.join(str(s['stored_jobs']) for s in stored)} stored",
                len(tick_units) == 1 and len(sweep_units) == 1),
        *([_target("one tenant's sustained submit rate (paper, sharded keys)",
                   ">= 10,000 jobs/s", f"{tenant['jobs_per_second']:,} jobs/s",
                   tenant["jobs_per_second"] >= 10_000)]
          if (tenant := max(r["scaling"].get("one_tenant", []), default=None,
                            key=lambda t: t["jobs_per_second"])) else []),
        _target("API handler cold start (import, wall)", "<= 300 ms",
                f"{imports[api]:.0f} ms ({api})" + (
                    f" (its first request then builds the app: {primed['wall']:.0f} ms "
                    "import + build)" if primed else "")
                + f"; slowest handler {slowest} {imports[slowest]:.0f} ms",
                imports[api] <= 300),
        _target("code asset size (zipped)", "<= 10 MB", f"{zipped / MB:.1f} MB",
                zipped <= 10 * MB),
    ]
    if "idle" in r:
        found.append(_idle_target(r["idle"]))
    return found


def _idle_target(idle: dict[str, Any]) -> dict[str, Any]:
    return _target("idle AWS requests per second of `leasehold dev`", "<= 3",
                   f"{idle['requests_per_second']:g} ({idle['workers']} workers)",
                   idle["requests_per_second"] <= 3)


def _idle_section(idle: dict[str, Any]) -> list[str]:
    waits = idle["queue_wait_s_by_priority"]
    return [
        "",
        "## 8. The idle local runtime",
        "",
        f"`leasehold dev` with {idle['workers']} worker processes, left alone for "
        f"{idle['settle_seconds']:g} s (its loops back off), then every AWS request of every "
        f"process counted at the embedded emulator for {idle['seconds']:g} s: "
        f"**{idle['requests_per_second']:g} requests/s** ({idle['requests']} requests). "
        "By operation, per second: "
        + ", ".join(f"{op} {n:g}" for op, n in idle["by_operation_per_second"].items()) + ".",
        "",
        "Then one no-op job per priority, each submitted to the idle runtime alone; its queue "
        "wait (`started_at - created_at`): "
        + ", ".join(f"{p} {w:.3f} s" for p, w in waits.items()) + ".",
    ]


def _fairness_targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    fair = r.get("fairness")
    if not fair:
        return []
    alone, noisy = fair["quiet_alone"]["p99_s"], fair["quiet_with_noisy"]["p99_s"]
    ratio = fair["p99_ratio"]
    # The quiet tenant must never be refused: its refused jobs would have no wait to count.
    quiet_refused = sum(fair[phase].get(outcome, 0) for phase in ("quiet_alone", "quiet_with_noisy")
                        for outcome in ("refused", "overloaded", "error"))
    return [_target(
        "quiet tenant's queue wait p99 with a tenant at 5x capacity", "<= 2x its p99 alone",
        f"{ratio}x ({noisy:.3f} s vs {alone:.3f} s alone; noisy tenant "
        f"{fair['noisy']['admitted']} admitted, {fair['noisy']['refused']} refused"
        + (f"; quiet tenant {quiet_refused} not admitted" if quiet_refused else "") + ")",
        ratio is not None and ratio <= 2 and not quiet_refused)]


def _fairness_lines(r: dict[str, Any]) -> list[str]:
    f = r.get("fairness")
    if not f:
        return []
    a, lim = f["noisy"], f["limits"]

    def row(name: str, part: dict[str, Any]) -> str:
        return _row(name, part.get("count", 0), f"{part['achieved_rate']}",
                    f"{part['p50_s']:.3f} s", f"{part['p99_s']:.3f} s",
                    part.get("refused", 0) + part.get("overloaded", 0) + part.get("error", 0))

    return [
        "",
        "### 2b. Fairness: a quiet tenant's queue wait while another floods",
        "",
        f"Same runtime, capacity {f['capacity_jobs_per_second']} jobs/s. Tenant B submits at "
        f"5% of it for {f['seconds_per_phase']:g} s alone, then for as long while tenant A "
        f"submits at 5x ({a['target_rate']} jobs/s asked, {a['attempted_rate']} attempted), "
        "both through the API's admission with per-tenant limits sized to the fleet: rate "
        f"{lim['rate']}/s, burst {lim['burst']}, live cap {lim['max_live']}. Fair queues: "
        f"{f['fair_queues']}. A: {a['admitted']} admitted, {a['refused']} refused (429), "
        f"{a['overloaded']} overloaded (503), {a['errors']} errors; its admitted jobs' wait "
        f"p99 {a['wait']['p99_s']} s ({a['started_by_end']} started by the end).",
        "",
        _row("tenant B", "jobs", "jobs/s", "wait p50", "wait p99", "not admitted"),
        _row("---", "---", "---", "---", "---", "---"),
        row("alone", f["quiet_alone"]),
        row("with A flooding", f["quiet_with_noisy"]),
        "",
        f"p99 with A / p99 alone: **{f['p99_ratio']}**.",
    ]


def _misses(r: dict[str, Any]) -> list[str]:
    """Why each missed target missed, in this run's own figures."""
    missed = {t["name"] for t in r["targets"] if not t["met"]}
    if not missed:
        return []
    lines = ["", "## Why the misses", ""]
    floor = r["throughput"]["floor"]
    per_job = r["per_job"]
    if any(name.startswith("throughput") for name in missed):
        api = per_job["immediate_via_api"]
        lines.append(
            "- **Throughput.** The floor and Leasehold run on the same emulator, and both are "
            "bound by its one process (a core, one GIL): the floor reaches "
            f"{floor['jobs_per_second']} jobs/s. Per job, Leasehold asks the emulator for "
            f"{per_job['immediate']['requests']:g} requests through the library and "
            f"{api['requests']:g} through the API "
            f"({', '.join(f'{k} {v:g}' for k, v in api['requests_by_operation'].items())}), "
            "against the floor's 4.2, and its requests cost moto more: each update carries "
            "the job's history and returns the whole row (the store's observers need it), "
            "and an API job is admitted and released in two transactions (the job row with "
            "the tenant's item, so neither can be lost without the other). The worker "
            "processes, the API and the benchmark client share the remaining core. On AWS "
            "none of this is one process; these ratios measure the emulator's cost per job.")
    fair = r.get("fairness") or {}
    if fair and any(name.startswith("quiet tenant") for name in missed):
        quiet, alone, noisy = fair["quiet_with_noisy"], fair["quiet_alone"], fair["noisy"]
        lines.append(
            "- **The quiet tenant.** It did not wait behind the noisy tenant's backlog: the "
            f"noisy tenant's own admitted jobs waited p50 {noisy['wait']['p50_s']} s, the "
            f"quiet one's p50 {quiet['p50_s']} s (alone {alone['p50_s']} s), and the noisy "
            f"backlog was bounded by its limits ({noisy['admitted']} admitted, "
            f"{noisy['refused']} refused at rate {fair['limits']['rate']}/s, half the "
            "capacity). Every job waited longer because the one emulator process was "
            "saturated by the flood (admitted and refused submissions both cost it CPU; the "
            f"client reached {noisy['attempted_rate']} of the {noisy['target_rate']} "
            "attempts/s asked). DynamoDB partitions and SQS are not one shared CPU; here the "
            "ratio measures that CPU's saturation, not queueing.")
    if any(name.startswith("cost per million") for name in missed):
        cost = r["cost"]["per_million_jobs"]["immediate"]
        units = per_job["immediate"]["write_units_by_table"]
        fixed = cost["dynamodb"] + cost["sqs"] + cost["eventbridge"]
        lines.append(
            f"- **Cost.** DynamoDB ${cost['dynamodb']:.2f} + SQS ${cost['sqs']:.2f} + one "
            f"terminal event ${cost['eventbridge']:.2f} = ${fixed:.2f} before any Lambda time: "
            "the design's floor is above $5. The write units: "
            + ", ".join(f"{k} {v:g}" for k, v in units.items())
            + " (the row's put, lease and finish; the listing index once; the sweep index "
            "on entry and exit). The worker Lambda's "
            f"${cost['lambda_worker']:.2f} is {per_job['worker_seconds_per_job'] * 1000:.0f} "
            "ms of worker time per job measured against the emulator (AWS answers in single-"
            "digit ms). Under $5 needs a job that does not enter the sweep index when it is "
            "put (send first, and a worker that waits for a row not there yet): not built, "
            "as it changes the hand-off's failure model.")
    return lines


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _ops(ops: dict[str, float]) -> str:
    return ", ".join(f"{name.split('.', 1)[1]} {n:g}" for name, n in ops.items())


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
        _row("target", "before issue 13", "goal", "measured", "verdict"),
        _row("---", "---", "---", "---", "---"),
    ]
    for t in r["targets"]:
        before = next((v for k, v in BEFORE_ISSUE_13.items() if t["name"].startswith(k)), "")
        if t["name"].startswith("quiet tenant"):
            before = "not measured"
        lines.append(_row(t["name"], before, t["target"], t["measured"],
                          "met" if t["met"] else "**MISSED**"))
    lines += _misses(r)
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
        _row("worker processes", "library jobs/s", "ratio to floor", "HTTP API jobs/s",
             "ratio to floor", "jobs per run"),
        _row("---", "---", "---", "---", "---", "---"),
    ]
    for run in sorted(r["throughput"]["runs"], key=lambda x: x["workers"]):
        lines.append(_row(run["workers"], run["library"]["jobs_per_second"],
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
        _row("jobs", "p50", "p99", "max"),
        _row("---", "---", "---", "---"),
        _row(q["count"], f"{q['p50_s']:.3f} s", f"{q['p99_s']:.3f} s", f"{q['max_s']:.3f} s"),
        *_client_lines(r.get("client_result")),
        *_fairness_lines(r),
        "",
        "## 3. Timing precision (start lateness = `first_started_at - run_at`)",
        "",
        f"Delayed jobs (delays {p['delays_s'][0]:g}-{p['delays_s'][1]:g} s with millisecond "
        "parts) and a `rate(2 seconds)` schedule, "
        f"together for {p['seconds']:g} s; the local ticker runs every second. Negative "
        "lateness is an early start.",
        "",
    ]
    lines += _lateness_table("kind", p)
    lines += _tick_lines(p)

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
        _row("job", "requests", "by operation", "write units", "by table/index",
             "read units"),
        _row("---", "---", "---", "---", "---", "---"),
    ]
    for label, key in (("immediate", "immediate"), ("immediate via API", "immediate_via_api"),
                       ("delayed", "delayed"), ("retried once", "retried"),
                       ("cron occurrence", "cron_occurrence")):
        k = pj[key]
        lines.append(_row(label, f"{k['requests']:g}", _ops(k["requests_by_operation"]),
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
    lines += _sweep_index(r.get("sweep_index") or [])

    c = r["cost"]
    lines += [
        "",
        "## 5. Cost per million jobs (us-east-1 on-demand)",
        "",
        _row("workload", "DynamoDB", "SQS", "EventBridge", "Lambda", "API Gateway", "total"),
        _row("---", "---", "---", "---", "---", "---", "---"),
    ]
    for label, key in (("Leasehold immediate", "immediate"), ("Leasehold delayed", "delayed"),
                       ("Leasehold retried once", "retried"),
                       ("Leasehold cron occurrence", "cron_occurrence"),
                       ("Leasehold immediate via API", "immediate_via_api")):
        k = c["per_million_jobs"][key]
        lam = k["lambda_worker"] + k.get("lambda_api", 0)
        lines.append(_row(label, f"${k['dynamodb']:.2f}", f"${k['sqs']:.2f}",
                          f"${k.get('eventbridge', 0):.2f}", f"${lam:.2f}",
                          f"${k.get('api_gateway', 0):.2f}", f"**${k['total']:.2f}**"))
    for label, dollars in c["alternatives_per_million_jobs"].items():
        lines.append(_row(label, "", "", "", "", "", f"${dollars:.2f}"))
    lines += ["", f"Fixed per month (ticker and sweeper once a minute): "
                  f"${c['fixed_per_month']}." if c["fixed_per_month"] is not None else "", ""]
    lines += _storage(r["per_job"]["immediate"])
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
        _row("stored jobs", "ticker read units", "ticker queries", "sweeper read units",
             "sweeper queries", "promoted / recovered", "moto seconds (tick, sweep)"),
        _row("---", "---", "---", "---", "---", "---", "---"),
    ]
    for s in sc["stored"]:
        lines.append(_row(f"{s['stored_jobs']:,}", f"{s['ticker']['read_units']:g}",
                          f"{s['ticker']['queries']:g}", f"{s['sweeper']['read_units']:g}",
                          f"{s['sweeper']['queries']:g}",
                          f"{s['ticker']['promoted']} / {s['sweeper']['recovered']}",
                          f"{s['ticker']['seconds_in_moto']}, "
                          f"{s['sweeper']['seconds_in_moto']}"))
    for s in sc["skipped"]:
        lines.append(_row(f"{s['stored_jobs']:,}", "not run: " + s["reason"] +
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
                         f"{t['index_shards']} index shard(s): on DynamoDB by design at most "
                         f"**{t['jobs_per_second']:,} jobs/s** (bound by the {t['bound_by']}).")
            continue
        lines.append(
            f"\nOne tenant through admission, {t['admission_shards']} admission item(s) and "
            f"{t['index_shards']} `by_tenant_shard` shard(s): {t['submitted_per_second']} "
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
        _row("handler", "import wall ms", "import CPU ms"),
        _row("---", "---", "---"),
    ]
    for name, wall in imp["wall_ms"].items():
        lines.append(_row(name, wall, imp["cpu_ms"][name]))
    if "api_primed_ms" in imp:
        lines.append(_row("api + prime() (its first request's build)",
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
        lines += _idle_section(r["idle"])
    lines += front_door_report.section(r)
    lines += durable.markdown(r.get("durable"))
    lines += flow.markdown(r.get("flow"))
    # `make bench-cost`'s own section (bench/option_cost.json), kept when this page is rewritten.
    lines += option_cost.recorded_section()
    return "\n".join(lines) + "\n"


def _sweep_index(rows: list[dict[str, Any]]) -> list[str]:
    """Section 4's long jobs: what the sweep index costs a job that runs a while."""
    if not rows:
        return []
    lines = [
        "",
        "Long jobs (`bench/sweep_index.py`, 60 s leases, a heartbeat every 20 s, a sweep "
        "every minute): `sweep` index write units per job, against the old `leases` index whose "
        "key moved on the lease and every heartbeat (1 + 2 + 2 per heartbeat + 1).",
        "",
        _row("heartbeats", "minutes running", "sweep index units", "old leases index units",
             "sweeper moves", "jobs table units"),
        _row("---", "---", "---", "---", "---", "---"),
    ]
    for row in rows:
        lines.append(_row(row["heartbeats"], f"{row['minutes_running']:g}",
                          f"{row['index_write_units']:g}", row["index_write_units_before"],
                          f"{row['sweeper_moves_per_job']:g}",
                          f"{row['jobs_table_write_units']:g}"))
    return lines


def throughput_threads(r: dict[str, Any]) -> int:
    return int(r["throughput"]["floor"]["client_threads"])


def _client_lines(c: dict[str, Any] | None) -> list[str]:
    """Application code's wait: ``Client.submit(...).result()`` (bench/client_latency.py)."""
    if not c:
        return []
    return [
        "",
        f"From application code (`bench/client_latency.py`): {c['jobs']} echo jobs one at a "
        f"time, `Client().submit(...)` to `.result()` in hand, {c['workers']} worker "
        f"process(es), {c['requests_per_job']:g} API requests per job (the submit and the "
        "long polls `GET /jobs/{id}?wait_seconds=`).",
        "",
        _row("jobs", "p50", "p99", "max"),
        _row("---", "---", "---", "---"),
        _row(c["jobs"], f"{c['p50_s']:.3f} s", f"{c['p99_s']:.3f} s", f"{c['max_s']:.3f} s"),
    ]


def _storage(immediate: dict[str, Any]) -> list[str]:
    """Storage per million jobs a month, with and without retention (issue 25)."""
    st = cost.storage(immediate)
    tenants = immediate["write_units_by_table"].get("tenants", 0)
    return [
        f"Storage (DynamoDB Standard $0.25 + PITR $0.20 per GB-month): a finished job takes "
        f"at most {st['bytes_per_job_at_most']:,} bytes with its listing entry, "
        f"{st['gb_per_million_jobs']:g} GB per million. Without retention each month's million "
        f"costs ${st['without_retention_per_month_per_million_stored']:.3f} every month, for "
        f"ever: at a million jobs a day the table bills "
        f"${st['without_retention_after_a_year_of_1m_a_day']:.2f} a month after a year and "
        f"keeps growing. With {st['retention_days']}-day retention (TTL) a million jobs cost "
        f"${st['with_retention_per_million_jobs']:.3f} once, and a million a day holds at "
        f"${st['with_retention_steady_at_1m_a_day']:.2f} a month.",
        "",
        f"Per-task figures and outcome counts (the console's Tasks page and `/stats`, issue 25): "
        f"both are atomic ADDs on the tenants table, once per worker batch per task, measured "
        f"here at {tenants:g} write units per job (batches of the bench's size): "
        f"${tenants * cost.PRICES['dynamodb_per_million_write_units']:.2f} per million jobs, "
        f"included in the DynamoDB figure above.",
        "",
    ]
