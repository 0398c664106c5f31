"""The targets of issue 7 judged against a run's results: each a name, the target, what was
measured and whether it was met (the table at the top of BENCHMARKS.md)."""

from __future__ import annotations

from typing import Any

MB = 1024 * 1024


def _target(name: str, target: str, measured: str, met: bool) -> dict[str, Any]:
    return {"name": name, "target": target, "measured": measured, "met": bool(met)}


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
