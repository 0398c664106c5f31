"""``leasehold jobs bulk ACTION``: preview, then run, an action on every job a search matches
(``POST /jobs/bulk``), and follow its progress."""

from __future__ import annotations

import argparse
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from leasehold.cli import job_control
from leasehold.cli.client import ApiError, Client
from leasehold.cli.inputs import UsageError
from leasehold.cli.output import emit, fail, fields
from leasehold.cli.parsing import command, group

STATES = ["SCHEDULED", "WAITING", "QUEUED", "RUNNING", "SUCCEEDED", "DEAD", "CANCELLED"]
_AGO = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|min|h|d)$")
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def register(subparsers: Any) -> None:
    actions = group(subparsers, "jobs", "act on jobs: pause, resume or reset one; act on "
                                        "many at once", [
        "leasehold jobs pause 01JABCDEF0123456789ABCDEFG",
        "leasehold jobs reset 01JABCDEF0123456789ABCDEFG --from-step charge",
        "leasehold jobs bulk retry --error-type TimeoutError --since 2h --dry-run",
        "leasehold jobs bulk cancel --label env:staging --state QUEUED"])
    job_control.register(actions)
    bulk = command(actions, "bulk", "retry, cancel, redrive or delete every job a search "
                                    "matches (a dry run counts them first)", [
        "leasehold jobs bulk retry --error-type TimeoutError --since 2h --dry-run",
        "leasehold jobs bulk redrive --label env:prod --since 2026-01-01T14:00:00Z --wait",
        "leasehold jobs bulk delete --state CANCELLED --until 30d"], run, action="bulk")
    bulk.add_argument("verb", choices=["retry", "cancel", "redrive", "delete"],
                      help="what to do to each match")
    add_search(bulk)
    bulk.add_argument("--dry-run", action="store_true",
                      help="only count the matches (and show a few); change nothing")
    bulk.add_argument("--wait", action="store_true",
                      help="follow the bulk job until it finishes")
    bulk.add_argument("--interval", type=float, default=1.0, help=argparse.SUPPRESS)


def add_search(parser: argparse.ArgumentParser) -> None:
    """The search options of ``GET /jobs`` (``leasehold jobs bulk``)."""
    parser.add_argument("--state", action="append", type=str.upper, choices=STATES,
                        help="only this state (repeat for several), e.g. --state DEAD")
    parser.add_argument("--task", help="only this task, e.g. --task send-email")
    parser.add_argument("--label", action="append", metavar="NAME:VALUE",
                        help="a label the job carries (repeat: all must match), e.g. "
                             "--label env:prod")
    parser.add_argument("--since", help="created at or after: a time ago (30m, 2h, 7d) or "
                                        "ISO-8601, e.g. --since 2h")
    parser.add_argument("--until", help="created before: a time ago or ISO-8601, e.g. "
                                        "--until 30d")
    parser.add_argument("--error-type", help="the last error's class or a base of it, e.g. "
                                             "--error-type TimeoutError")
    parser.add_argument("--error", dest="error_prefix",
                        help="the last error's message starts with this, e.g. "
                             "--error 'connection refused'")
    parser.add_argument("--id-prefix", help="job ids starting with this, e.g. --id-prefix 01K")


def when(option: str, value: str | None, now: datetime) -> str | None:
    """``2h`` (ago) or an ISO-8601 time with a zone, as ISO-8601 UTC."""
    if value is None:
        return None
    ago = _AGO.match(value.strip())
    if ago:
        at = now - timedelta(seconds=float(ago.group(1)) * _UNITS[ago.group(2)])
    else:
        try:
            at = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(option, f"{value!r} is neither a time ago (2h, 30m, 7d) nor "
                                     "ISO-8601") from None
        if at.tzinfo is None:
            raise UsageError(option, f"{value!r} needs a time zone, e.g. {value}Z")
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def search(args: argparse.Namespace, now: datetime | None = None) -> dict[str, Any]:
    """The search options as ``POST /jobs/bulk``'s ``filter``."""
    now = now or datetime.now(UTC)
    found = {"state": args.state, "task": args.task, "label": args.label,
             "error_type": args.error_type, "error_prefix": args.error_prefix,
             "id_prefix": args.id_prefix, "created_after": when("--since", args.since, now),
             "created_before": when("--until", args.until, now)}
    return {k: v for k, v in found.items() if v}


def run(args: argparse.Namespace) -> int:
    client = Client.from_args(args)
    try:
        body = {"action": args.verb, "filter": search(args), "dry_run": args.dry_run}
        reply = client.request("POST", "/jobs/bulk", body)
        if args.wait and not args.dry_run:
            while reply["state"] not in ("SUCCEEDED", "DEAD", "CANCELLED"):
                time.sleep(args.interval)
                reply = client.request("GET", f"/jobs/bulk/{reply['bulk_id']}")
    except (ApiError, UsageError) as exc:
        return fail(exc)
    emit(args, reply, show(reply))
    return 0


def referenced(counts: dict[str, Any]) -> str | None:
    """``4 (workflow: 3, durable parent: 1)``: the rows a delete keeps, and why."""
    total = counts.get("skipped_referenced")
    if not total:
        return None
    why = ", ".join(f"{name}: {n}" for name, n in sorted(counts.get("referenced_by", {}).items()))
    return f"{total} ({why}): still referenced, kept"


def show(reply: dict[str, Any]) -> str:
    if reply.get("dry_run"):
        count = f"{reply['matches']}" + ("" if reply["complete"] else "+ (stopped counting)")
        return fields([("would " + reply["action"], f"{count} job(s)"),
                       ("created before", reply.get("created_before")),
                       ("would keep", referenced(reply)),
                       ("for example", ", ".join(reply["sample"]) or None)])
    progress = reply.get("result") or reply.get("progress") or {}
    return fields([
        ("bulk job", reply["bulk_id"]), ("state", reply["state"]),
        ("created before", reply.get("created_before")),
        ("done", progress.get("done")), ("skipped", progress.get("skipped")),
        ("kept", referenced(progress)),
        ("paused", progress.get("paused")),
        ("follow", f"leasehold status {reply['bulk_id']}")])
