"""Client commands: submit, status, list, cancel, retry, dlq list|redrive, stats."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from leasehold.cli.client import ApiError, Client, add_client_options

TERMINAL = {"SUCCEEDED", "DEAD", "CANCELLED"}


def register(subparsers: Any) -> None:
    def command(name: str, help: str, run: Any) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = subparsers.add_parser(name, help=help,
                                                                description=help)
        add_client_options(parser)
        parser.set_defaults(run=run)
        return parser

    submit = command("submit", "submit a job", run_submit)
    submit.add_argument("task")
    submit.add_argument("payload", nargs="?", default=None,
                        help="JSON payload (default null), or @file.json")
    submit.add_argument("--priority", choices=["high", "normal", "low"])
    submit.add_argument("--pool")
    submit.add_argument("--delay", type=float, dest="delay_seconds", help="seconds from now")
    submit.add_argument("--run-at", help="ISO-8601 time with a zone")
    submit.add_argument("--idempotency-key")
    submit.add_argument("--max-attempts", type=int)
    submit.add_argument("--timeout", type=float, dest="timeout_seconds")
    submit.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    submit.add_argument("--wait", action="store_true", help="wait for the job to finish")
    submit.add_argument("--poll", type=float, default=0.5, help=argparse.SUPPRESS)

    status = command("status", "show a job", run_status)
    status.add_argument("job_id")
    status.add_argument("--history", action="store_true", help="show every transition")

    listing = command("list", "list your jobs, newest first", run_list)
    listing.add_argument("--state", action="append", type=str.upper)
    listing.add_argument("--task")
    listing.add_argument("--pool")
    listing.add_argument("--limit", type=int, default=20)
    listing.add_argument("--cursor")

    command("cancel", "cancel a job", run_cancel).add_argument("job_id")
    command("retry", "re-run a DEAD or CANCELLED job", run_retry).add_argument("job_id")
    command("stats", "jobs by state and queue depths", run_stats)

    dlq = subparsers.add_parser("dlq", help="dead letters: list or redrive DEAD jobs")
    actions = dlq.add_subparsers(dest="action", metavar="ACTION", required=True)
    dlq_list = actions.add_parser("list", help="list your DEAD jobs")
    dlq_redrive = actions.add_parser("redrive", help="re-queue your DEAD jobs of a pool")
    for parser in (dlq_list, dlq_redrive):
        add_client_options(parser)
        parser.add_argument("--pool", default=None if parser is dlq_list else "default")
        parser.add_argument("--task")
        parser.add_argument("--limit", type=int, default=50 if parser is dlq_list else 100)
    dlq_list.set_defaults(run=run_dlq_list)
    dlq_redrive.set_defaults(run=run_dlq_redrive)


# -- output -----------------------------------------------------------------------------------

def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    cells = [[("" if c is None else str(c)) for c in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in cells]
    return "\n".join(lines)


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def show_job(job: dict[str, Any], history: bool = False) -> str:
    fields = [
        ("job", job["job_id"]), ("task", job["task"]), ("state", job["state"]),
        ("pool/priority", f"{job['pool']}/{job['priority']}"),
        ("attempts", f"{job['attempts']}/{job['max_attempts']}"),
        ("created", job["created_at"]), ("run at", job.get("run_at")),
        ("started", job.get("started_at")), ("finished", job.get("finished_at")),
    ]
    if job.get("progress") is not None:
        fields.append(("progress", _short(job["progress"], 70)))
    if job.get("result") is not None:
        fields.append(("result", _short(job["result"], 70)))
    if job.get("error"):
        fields.append(("error", f"{job['error']['type']}: {_short(job['error']['message'], 70)}"))
    text = "\n".join(f"{name:<14}{value if value is not None else '-'}" for name, value in fields)
    if history:
        text += "\n\n" + table([(h["at"], h["from"] or "", h["to"], h["by"], h["reason"])
                                for h in job.get("history", [])],
                               ["AT", "FROM", "TO", "BY", "REASON"])
    return text


def jobs_table(jobs: list[dict[str, Any]]) -> str:
    return table([(j["job_id"], j["task"], j["state"], j["priority"], j["attempts"],
                   j["created_at"], j.get("finished_at")) for j in jobs],
                 ["JOB", "TASK", "STATE", "PRIORITY", "ATTEMPTS", "CREATED", "FINISHED"])


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    print(json.dumps(data, indent=2) if args.json else text)


def fail(error: ApiError) -> int:
    message = f"error: {error}"
    if error.retry_after:
        message += f" (retry after {error.retry_after}s)"
    print(message, file=sys.stderr)
    return 1


# -- commands ---------------------------------------------------------------------------------

def _payload(text: str | None) -> Any:
    if text is None:
        return None
    if text.startswith("@"):
        with open(text[1:]) as handle:
            return json.load(handle)
    try:
        return json.loads(text)
    except ValueError:
        return text  # a bare word is a string payload


def run_submit(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"task": args.task, "payload": _payload(args.payload)}
    for name in ("priority", "pool", "delay_seconds", "run_at", "idempotency_key",
                 "max_attempts", "timeout_seconds"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    if args.label:
        body["labels"] = dict(label.split("=", 1) for label in args.label)
    client = Client.from_args(args)
    try:
        job = client.request("POST", "/jobs", body)
        if args.wait:
            job = wait(client, job, args.poll, quiet=args.json)
    except ApiError as exc:
        return fail(exc)
    emit(args, job, show_job(job))
    return 0 if not args.wait or job["state"] == "SUCCEEDED" else 1


def wait(client: Client, job: dict[str, Any], poll: float, *, quiet: bool = False
         ) -> dict[str, Any]:
    """Poll until the job finishes, showing its state and progress on one line (stderr)."""
    spinner = "|/-\\"
    tick = 0
    started = time.monotonic()
    while job["state"] not in TERMINAL:
        if not quiet and sys.stderr.isatty():
            progress = "" if job.get("progress") is None else " " + _short(job["progress"], 50)
            sys.stderr.write(f"\r{spinner[tick % 4]} {job['job_id']} {job['state']:<9} "
                             f"attempt {job['attempts']} {time.monotonic() - started:5.1f}s"
                             f"{progress}\033[K")
            sys.stderr.flush()
        elif not quiet and tick == 0:
            print(f"waiting for {job['job_id']}...", file=sys.stderr)
        tick += 1
        time.sleep(poll)
        job = client.request("GET", f"/jobs/{job['job_id']}")
    if not quiet and sys.stderr.isatty():
        sys.stderr.write("\r\033[K")
    return job


def run_status(args: argparse.Namespace) -> int:
    try:
        job = Client.from_args(args).request("GET", f"/jobs/{args.job_id}")
    except ApiError as exc:
        return fail(exc)
    emit(args, job, show_job(job, history=args.history))
    return 0


def run_list(args: argparse.Namespace) -> int:
    query = {"state": args.state, "task": args.task, "pool": args.pool, "limit": args.limit,
             "cursor": args.cursor}
    try:
        page = Client.from_args(args).request("GET", "/jobs", query=query)
    except ApiError as exc:
        return fail(exc)
    text = jobs_table(page["jobs"])
    if page.get("next_cursor"):
        text += f"\n\nmore: --cursor {page['next_cursor']}"
    emit(args, page, text)
    return 0


def _job_action(args: argparse.Namespace, method: str, path: str) -> int:
    try:
        job = Client.from_args(args).request(method, path)
    except ApiError as exc:
        return fail(exc)
    emit(args, job, show_job(job))
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    return _job_action(args, "DELETE", f"/jobs/{args.job_id}")


def run_retry(args: argparse.Namespace) -> int:
    return _job_action(args, "POST", f"/jobs/{args.job_id}/retry")


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
    emit(args, stats, f"tenant {stats['tenant']}: {stats['live']} live\n\n{states}\n\n{queues}")
    return 0


def run_dlq_list(args: argparse.Namespace) -> int:
    query = {"pool": args.pool, "task": args.task, "limit": args.limit}
    try:
        page = Client.from_args(args).request("GET", "/dead-letters", query=query)
    except ApiError as exc:
        return fail(exc)
    rows = [(j["job_id"], j["task"], j["pool"], j["attempts"], j.get("finished_at"),
             _short((j.get("error") or {}).get("message", ""), 50)) for j in page["jobs"]]
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
    emit(args, report, f"redriven {len(report['redriven'])} job(s)"
         + "".join(f"\n  {job_id}" for job_id in report["redriven"]))
    return 0
