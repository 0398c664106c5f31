"""Operator commands: stats, workers, and dead letters (``dlq list | redrive``)."""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from leasehold.cli.client import ApiError, Client
from leasehold.cli.output import emit, fail, short, table
from leasehold.cli.parsing import command, group


def register(subparsers: Any) -> None:
    command(subparsers, "stats", "show your jobs by state, and queue depths",
            ["leasehold stats", "leasehold stats --json | jq .live"], run_stats)
    workers = command(subparsers, "workers",
                      "list live workers (polling and remote) and their jobs",
                      ["leasehold workers", "leasehold workers --pool default --json"],
                      run_workers)
    workers.add_argument("--pool", help="only this pool, e.g. --pool default")

    dlq = group(subparsers, "dlq", "dead letters: list or redrive DEAD jobs",
                ["leasehold dlq list --task fail", "leasehold dlq redrive --pool default"])
    listing = command(dlq, "list", "list your DEAD jobs", [
        "leasehold dlq list", "leasehold dlq list --pool default --task fail --limit 10"],
        run_dlq_list)
    redrive = command(dlq, "redrive", "re-queue your DEAD jobs of a pool", [
        "leasehold dlq redrive --pool default --task fail"], run_dlq_redrive)
    for parser, pool, limit in ((listing, None, 50), (redrive, "default", 100)):
        parser.add_argument("--pool", default=pool,
                            help=f"only this pool (default: {pool or 'all'}), e.g. "
                                 "--pool default")
        parser.add_argument("--task", help="only this task, e.g. --task fail")
        parser.add_argument("--limit", type=int, default=limit,
                            help=f"at most this many (default {limit}), e.g. --limit 10")


def run_stats(args: argparse.Namespace) -> int:
    try:
        stats = Client.from_args(args).request("GET", "/stats")
    except ApiError as exc:
        return fail(exc)
    states = table([(state, n) for state, n in stats["jobs"].items()], ["STATE", "JOBS"])
    queues = table([(q["queue"], q["visible"], q["in_flight"], q["delayed"], q["dead_letters"],
                     "-" if q["oldest_age_seconds"] is None else f"{q['oldest_age_seconds']:g}s")
                    for q in stats["queues"]],
                   ["QUEUE", "VISIBLE", "IN FLIGHT", "DELAYED", "DLQ", "OLDEST"])
    orphans = stats.get("orphan_slots") or 0
    held = f" ({orphans} more slots held by no job until the repair)" if orphans else ""
    emit(args, stats,
         f"tenant {stats['tenant']}: {stats['live']} live{held}\n\n{states}\n\n{queues}")
    return 0


def _age(then: str, now: datetime) -> str:
    try:
        seconds = (now - datetime.fromisoformat(then.replace("Z", "+00:00"))).total_seconds()
    except ValueError:
        return then
    return f"{max(0.0, seconds):.0f}s ago"


def run_workers(args: argparse.Namespace) -> int:
    try:
        reply = Client.from_args(args).request("GET", "/workers", query={"pool": args.pool})
    except ApiError as exc:
        return fail(exc)
    now = datetime.now().astimezone()
    rows = [(w["worker_id"], w["pool"],
             "remote" if w.get("kind") == "remote" else f"{w['host']}:{w['pid']}",
             _age(w["last_heartbeat"], now), w["processed"],
             ", ".join(w["current_jobs"]) or "-") for w in reply["workers"]]
    text = table(rows, ["WORKER", "POOL", "HOST:PID", "HEARTBEAT", "PROCESSED", "RUNNING"])
    emit(args, reply, text if rows else "no live workers")
    return 0


def run_dlq_list(args: argparse.Namespace) -> int:
    query = {"pool": args.pool, "task": args.task, "limit": args.limit}
    try:
        page = Client.from_args(args).request("GET", "/dead-letters", query=query)
    except ApiError as exc:
        return fail(exc)
    rows = [(j["job_id"], j["task"], j["pool"], j["attempts"], j.get("finished_at"),
             short((j.get("error") or {}).get("message", ""), 50)) for j in page["jobs"]]
    emit(args, page, table(rows, ["JOB", "TASK", "POOL", "ATTEMPTS", "DIED", "ERROR"]))
    return 0


def run_dlq_redrive(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"pool": args.pool, "limit": args.limit}
    if args.task:
        body["task"] = args.task
    try:
        report = Client.from_args(args).request("POST", "/dead-letters/redrive", body)
    except ApiError as exc:
        return fail(exc)
    text = f"redriven {len(report['redriven'])} job(s)" + "".join(
        f"\n  {job_id}" for job_id in report["redriven"])
    if report.get("left_in_place"):
        # Admission refused the rest (rate, live-job limit, backlog): they stay DEAD.
        text += (f"\nleft {report['left_in_place']} job(s) DEAD: {report.get('left_because')}"
                 f" (redrive again in {report.get('retry_after_seconds') or 1:g}s)")
    emit(args, report, text)
    return 0
