"""Job commands: submit, submit-many, status, list, cancel, retry."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from leasehold.cli.client import ApiError, Client
from leasehold.cli.inputs import UsageError, read_json
from leasehold.cli.output import (
    emit,
    fail,
    jobs_table,
    more,
    short,
    show_job,
)
from leasehold.cli.parsing import command

TERMINAL = {"SUCCEEDED", "DEAD", "CANCELLED", "EXPIRED"}
STATES = ["SCHEDULED", "WAITING", "QUEUED", "RUNNING", "SUCCEEDED", "DEAD", "CANCELLED",
          "EXPIRED", "SLEEPING"]


def register(subparsers: Any) -> None:
    submit = command(subparsers, "submit", "submit a job", [
        "leasehold submit echo '{\"hi\": 1}'",
        "leasehold submit sleep '{\"seconds\": 3}' --priority high --wait",
        "leasehold submit send-email @mail.json --delay 7200",
        "leasehold submit echo hello --raw          # a plain string payload",
        "leasehold submit --target '{\"http\": {\"url\": \"https://example.com/hook\", "
        "\"method\": \"POST\", \"body\": {\"id\": 7}}}'   # a job with no code",
    ], run_submit)
    submit.add_argument("task", nargs="?", default=None,
                        help="the task's name, e.g. echo (or give --target)")
    submit.add_argument("--target", metavar="JSON",
                        help="a job with no code instead of a task: JSON or @file.json, "
                             "{\"http\": {\"url\", \"method\", ...}} or {\"aws\": "
                             "{\"service\", \"action\", \"parameters\"}}, e.g. --target @hook.json")
    submit.add_argument("payload", nargs="?", default=None,
                        help="JSON (default null), @file.json, or @- for stdin, e.g. "
                             "'{\"to\": \"a@example.com\"}'")
    submit.add_argument("--raw", action="store_true",
                        help="send the payload as a plain string, not JSON, e.g. --raw hello")
    submit.add_argument("--priority", choices=["high", "normal", "low"],
                        help="which queue, e.g. --priority high (default: the task's)")
    submit.add_argument("--pool", help="worker pool, e.g. --pool default (default: the task's)")
    submit.add_argument("--delay", type=float, dest="delay_seconds",
                        help="run this many seconds from now, e.g. --delay 600")
    submit.add_argument("--run-at", help="run at this ISO-8601 time with a zone, e.g. "
                                         "--run-at 2027-06-01T09:00:00+02:00 (the past: now)")
    submit.add_argument("--idempotency-key",
                        help="a replay with this key returns the first job, e.g. order-42")
    submit.add_argument("--max-attempts", type=int, help="attempts before DEAD, e.g. 3")
    submit.add_argument("--timeout", type=float, dest="timeout_seconds",
                        help="seconds per attempt, e.g. --timeout 60")
    submit.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                        help="a label (repeat for several), e.g. --label team=billing")
    submit.add_argument("--unique", metavar="KEY",
                        help="while a job with this key is live, answer it instead of "
                             "making another, e.g. --unique 'import:{payload.file}'")
    submit.add_argument("--debounce", metavar="KEY:SECONDS[:MAX_WAIT]",
                        help="coalesce submissions with this key into one run, SECONDS "
                             "after the last (never later than MAX_WAIT after the first), "
                             "e.g. --debounce rebuild:10:60")
    submit.add_argument("--start-within", type=float, dest="start_within_seconds",
                        help="not started within this many seconds, the job ends EXPIRED, "
                             "e.g. --start-within 300")
    submit.add_argument("--expires-at", help="not started by this ISO-8601 time, the job "
                                             "ends EXPIRED, e.g. "
                                             "--expires-at 2027-06-01T09:05:00Z")
    submit.add_argument("--concurrency", metavar="KEY=LIMIT",
                        help="at most LIMIT jobs with KEY running at once; the rest wait, "
                             "e.g. --concurrency 'stripe:{payload.account}=2'")
    submit.add_argument("--wait", action="store_true",
                        help="show progress until the job finishes; exit 1 unless it "
                             "SUCCEEDED")
    submit.add_argument("--poll", type=float, default=0.5, help=argparse.SUPPRESS)

    many = command(subparsers, "submit-many",
                   "submit jobs from JSON lines, 100 per request (POST /jobs/batch)", [
        "leasehold submit-many jobs.jsonl",
        "printf '%s\\n' '{\"task\": \"echo\", \"payload\": 1}' | leasehold submit-many -",
    ], run_submit_many)
    many.add_argument("file", help="a file of JSON lines, one POST /jobs body each "
                                   "(blank lines skipped), or - for stdin")
    status = command(subparsers, "status", "show a job", [
        "leasehold status 01JABCDEF0123456789ABCDEFG --history"], run_status)
    status.add_argument("job_id", help="the job's id, as submit printed it")
    status.add_argument("--history", action="store_true", help="show every transition")

    listing = command(subparsers, "list", "list your jobs, newest first", [
        "leasehold list --state DEAD --task fail --limit 10",
        "leasehold list --label env:prod",
        "leasehold list --json | jq -r '.jobs[].job_id'"], run_list)
    listing.add_argument("--state", action="append", type=str.upper, choices=STATES,
                         help="only this state (repeat for several), e.g. --state QUEUED")
    listing.add_argument("--task", help="only this task, e.g. --task echo")
    listing.add_argument("--pool", help="only this pool, e.g. --pool default")
    listing.add_argument("--label", action="append", metavar="NAME:VALUE",
                         help="only jobs carrying this label (repeat: all must match), e.g. "
                              "--label env:prod")
    listing.add_argument("--limit", type=int, default=20,
                         help="at most this many (1-200), e.g. --limit 10")
    listing.add_argument("--cursor", help="the next page: what the last page printed "
                                          "after 'more:', e.g. --cursor eyJj...")
    listing.add_argument("--code-version", help="only jobs first run by this code version, "
                                                "e.g. --code-version 3f9a1c2b7d4e")
    listing.add_argument("--patch", help="live durable jobs that may still take the old "
                                         "branch of ctx.patched(PATCH), e.g. --patch "
                                         "rename-charge")

    command(subparsers, "cancel", "cancel a job (a running one stops at its next heartbeat)", [
        "leasehold cancel 01JABCDEF0123456789ABCDEFG"], run_cancel
    ).add_argument("job_id", help="the job's id")
    command(subparsers, "retry", "re-run a DEAD or CANCELLED job", [
        "leasehold retry 01JABCDEF0123456789ABCDEFG"], run_retry
    ).add_argument("job_id", help="the job's id")


def run_submit(args: argparse.Namespace) -> int:
    try:
        if (args.target is None) == (args.task is None):
            raise UsageError("task", "give a task's name or --target, one of them")
        target = None if args.target is None else read_json("--target", args.target)
        payload = read_json("payload", args.payload, raw=args.raw)
        labels = dict(_label(text) for text in args.label)
        debounce = None if args.debounce is None else _debounce(args.debounce)
        concurrency = _concurrency(args.concurrency) if args.concurrency else None
    except UsageError as exc:
        return fail(exc)
    options = {name: getattr(args, name) for name in (
        "priority", "pool", "delay_seconds", "run_at", "idempotency_key", "max_attempts",
        "timeout_seconds", "start_within_seconds", "expires_at")}
    options["unique"] = None if args.unique is None else {"key": args.unique}
    options["debounce"] = debounce
    options["concurrency"] = concurrency
    client = Client.from_args(args)
    try:
        handle = client.submit(args.task, payload, labels=labels or None, **options) \
            if target is None else \
            client.submit_target(target, labels=labels or None, **options)
        job = handle.job
        warnings = job.get("warnings") or []
        if args.wait:
            job = {**wait(client, job, args.poll, quiet=args.json), "warnings": warnings}
    except ApiError as exc:
        return fail(exc)
    emit(args, job, show_job(job))
    return 0 if not args.wait or job["state"] == "SUCCEEDED" else 1


def run_submit_many(args: argparse.Namespace) -> int:
    """One line per job, in order: ``201 JOB_ID``, ``200 JOB_ID`` (an existing job
    answered), or ``STATUS error: FIELD: MESSAGE``; exit 1 if any job was refused."""
    try:
        jobs = read_lines(args.file)
    except UsageError as exc:
        return fail(exc)
    try:
        results = Client.from_args(args).submit_many(jobs)
    except ApiError as exc:
        return fail(exc)
    for result in results:
        if args.json:
            print(json.dumps(result, separators=(",", ":")))
        elif result.get("job"):
            print(f"{result['status']} {result['job']['job_id']}")
        else:
            error = result.get("error") or {}
            print(f"{result['status']} error: {error.get('message', '')}")
    return 1 if any(result["status"] >= 400 for result in results) else 0


def read_lines(source: str) -> list[dict[str, Any]]:
    """The jobs of a JSON-lines file (or stdin for ``-``): each line one JSON object."""
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError("file", f"cannot read {source}: {exc.strerror}") from None
    jobs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            job = json.loads(line)
        except ValueError:
            raise UsageError("file", f"line {number} is not JSON") from None
        if not isinstance(job, dict):
            raise UsageError("file", f"line {number} is not a JSON object (a POST /jobs "
                                     "body)")
        jobs.append(job)
    if not jobs:
        raise UsageError("file", f"{source} holds no jobs")
    return jobs


def _debounce(text: str) -> dict[str, Any]:
    """``KEY:SECONDS[:MAX_WAIT]``, split from the right (a key may hold ``:``)."""
    parts = text.rsplit(":", 2)
    try:
        if len(parts) == 3 and _number(parts[1]):
            return {"key": parts[0], "seconds": float(parts[1]),
                    "max_wait_seconds": float(parts[2])}
        key, seconds = text.rsplit(":", 1)
        return {"key": key, "seconds": float(seconds)}
    except ValueError:
        raise UsageError("--debounce", f"{text!r} is not KEY:SECONDS[:MAX_WAIT]") from None


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _label(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise UsageError("--label", f"{text!r} is not KEY=VALUE")
    return name, value


def _concurrency(text: str) -> dict[str, Any]:
    key, _, limit = text.rpartition("=")
    if not key or not limit.isdigit():
        raise UsageError("--concurrency", f"{text!r} is not KEY=LIMIT")
    return {"key": key, "limit": int(limit)}


def wait(client: Client, job: dict[str, Any], poll: float, *, quiet: bool = False
         ) -> dict[str, Any]:
    """Poll until the job finishes, showing its state and progress on one line (stderr)."""
    spinner = "|/-\\"
    tick = 0
    started = time.monotonic()
    while job["state"] not in TERMINAL:
        if not quiet and sys.stderr.isatty():
            progress = "" if job.get("progress") is None else " " + short(job["progress"], 50)
            sys.stderr.write(f"\r{spinner[tick % 4]} {job['job_id']} {job['state']:<9} "
                             f"attempt {job['attempts']} {time.monotonic() - started:5.1f}s"
                             f"{progress}\033[K")
            sys.stderr.flush()
        elif not quiet and tick == 0:
            print(f"waiting for {job['job_id']}...", file=sys.stderr)
        tick += 1
        # A long poll: the answer comes as soon as the job finishes, else after ``poll``
        # seconds (when the progress line is redrawn).
        job = client.get(job["job_id"], wait_seconds=poll)
    if not quiet and sys.stderr.isatty():
        sys.stderr.write("\r\033[K")
    return job


def run_status(args: argparse.Namespace) -> int:
    try:
        job = Client.from_args(args).get(args.job_id)
    except ApiError as exc:
        return fail(exc)
    emit(args, job, show_job(job, history=args.history))
    return 0


def run_list(args: argparse.Namespace) -> int:
    try:
        page = Client.from_args(args).list(state=args.state, task=args.task, pool=args.pool,
                                           limit=args.limit, cursor=args.cursor,
                                           code_version=args.code_version, patch=args.patch,
                                           label=args.label)
    except ApiError as exc:
        return fail(exc)
    emit(args, page, jobs_table(page["jobs"]) + more(page))
    return 0


def _job_action(args: argparse.Namespace, action: str, done: str) -> int:
    client = Client.from_args(args)
    try:
        job = client.cancel(args.job_id) if action == "cancel" else \
            client.retry(args.job_id).job
    except ApiError as exc:
        return fail(exc)
    if job.get("cancel_requested") and job["state"] == "RUNNING":
        done = (f"cancel requested for {job['job_id']}: it is RUNNING and stops at its next "
                "heartbeat (`leasehold status` shows CANCELLED then)")
    emit(args, job, f"{done}\n\n{show_job(job)}")
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    return _job_action(args, "cancel", f"cancelled {args.job_id}")


def run_retry(args: argparse.Namespace) -> int:
    return _job_action(args, "retry", f"retrying {args.job_id}")
