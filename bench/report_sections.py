"""The parts of BENCHMARKS.md longer than a table row (the tick's lateness, the idle runtime,
fairness between tenants, why the misses missed, the sweep index, the client, storage) and the
table helpers the page shares."""

from __future__ import annotations

from typing import Any

from bench import cost


def table_row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def operations(ops: dict[str, float]) -> str:
    return ", ".join(f"{name.split('.', 1)[1]} {n:g}" for name, n in ops.items())


def tick_lines(p: dict[str, Any]) -> list[str]:
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
    return lines + lateness_table("kind (1 s tick)", t)


def lateness_table(first: str, p: dict[str, Any]) -> list[str]:
    """Start lateness of the delayed jobs and the 2 s schedule, one row each."""
    lines = [table_row(first, "jobs", "p50", "p99", "min", "max", "started early"),
             table_row("---", "---", "---", "---", "---", "---", "---")]
    for label, key in (("delayed", "delayed"), ("schedule every 2 s", "cron_every_2s")):
        s = p[key]
        lines.append(table_row(label, s["count"], f"{s['p50_s']:.3f} s", f"{s['p99_s']:.3f} s",
                          f"{s['min_s']:.3f} s" if s["min_s"] is not None else "-",
                          f"{s['max_s']:.3f} s" if s["max_s"] is not None else "-",
                          s["early"]))
    return lines


def idle_section(idle: dict[str, Any]) -> list[str]:
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


def fairness_lines(r: dict[str, Any]) -> list[str]:
    f = r.get("fairness")
    if not f:
        return []
    a, lim = f["noisy"], f["limits"]

    def row(name: str, part: dict[str, Any]) -> str:
        return table_row(name, part.get("count", 0), f"{part['achieved_rate']}",
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
        table_row("tenant B", "jobs", "jobs/s", "wait p50", "wait p99", "not admitted"),
        table_row("---", "---", "---", "---", "---", "---"),
        row("alone", f["quiet_alone"]),
        row("with A flooding", f["quiet_with_noisy"]),
        "",
        f"p99 with A / p99 alone: **{f['p99_ratio']}**.",
    ]


def misses(r: dict[str, Any]) -> list[str]:
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


def sweep_index(rows: list[dict[str, Any]]) -> list[str]:
    """Section 4's long jobs: what the sweep index costs a job that runs a while."""
    if not rows:
        return []
    lines = [
        "",
        "Long jobs (`bench/sweep_index.py`, 60 s leases, a heartbeat every 20 s, a sweep "
        "every minute): `sweep` index write units per job, against the old `leases` index whose "
        "key moved on the lease and every heartbeat (1 + 2 + 2 per heartbeat + 1).",
        "",
        table_row("heartbeats", "minutes running", "sweep index units", "old leases index units",
             "sweeper moves", "jobs table units"),
        table_row("---", "---", "---", "---", "---", "---"),
    ]
    for row in rows:
        lines.append(table_row(row["heartbeats"], f"{row['minutes_running']:g}",
                          f"{row['index_write_units']:g}", row["index_write_units_before"],
                          f"{row['sweeper_moves_per_job']:g}",
                          f"{row['jobs_table_write_units']:g}"))
    return lines


def client_lines(c: dict[str, Any] | None) -> list[str]:
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
        table_row("jobs", "p50", "p99", "max"),
        table_row("---", "---", "---", "---"),
        table_row(c["jobs"], f"{c['p50_s']:.3f} s", f"{c['p99_s']:.3f} s", f"{c['max_s']:.3f} s"),
    ]


def storage(immediate: dict[str, Any]) -> list[str]:
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
