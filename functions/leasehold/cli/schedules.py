"""Schedule commands (``leasehold schedules ...``) and ``leasehold events tail``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from leasehold.cli.client import ApiError, Client, add_client_options
from leasehold.cli.jobs import emit, fail


def register(subparsers: Any) -> None:
    group = subparsers.add_parser("schedules", help="manage cron schedules",
                                  description="manage cron schedules")
    actions = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, help: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=help, description=help)
        add_client_options(parser)
        parser.set_defaults(run=run, action=name)
        if name not in ("create", "list"):
            parser.add_argument("schedule_id")
        return parser

    for name, help in (("create", "create a schedule"), ("update", "change fields in place")):
        parser = action(name, help)
        parser.add_argument("--cron", help="'*/5 * * * *', '*/2 * * * * *', '@hourly', "
                                           "'rate(5 minutes)'")
        parser.add_argument("--task")
        parser.add_argument("--payload", help="JSON")
        parser.add_argument("--workflow", metavar="FILE.json",
                            help="start this workflow instead of a job: the body of "
                                 "'workflow submit' ('-' reads stdin)")
        parser.add_argument("--timezone", help="IANA zone, e.g. Europe/London")
        parser.add_argument("--name")
        parser.add_argument("--priority", choices=["high", "normal", "low"])
        parser.add_argument("--pool")
        parser.add_argument("--misfire-policy", choices=["skip", "fire_once", "catch_up"])
        parser.add_argument("--overlap-policy", choices=["allow", "forbid", "replace"])
        parser.add_argument("--max-catch-up", type=int)
        parser.add_argument("--start-at")
        parser.add_argument("--end-at")
        parser.add_argument("--max-runs", type=int)
        parser.add_argument("--jitter", type=float, dest="jitter_seconds")
    listing = action("list", "list your schedules")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--cursor")
    for name, help in (("get", "show a schedule"), ("delete", "delete a schedule"),
                       ("pause", "pause a schedule"), ("resume", "resume a schedule"),
                       ("trigger", "run the schedule's job (or workflow) now, once"),
                       ("jobs", "list the schedule's runs")):
        action(name, help)
    action("next", "preview the next fire times").add_argument("--count", type=int, default=5)

    events = subparsers.add_parser("events", help="job state events",
                                   description="job state events (local runtime)")
    verbs = events.add_subparsers(dest="action", metavar="ACTION", required=True)
    tail = verbs.add_parser("tail", help="print events from the local event log")
    tail.add_argument("--log", default=os.environ.get("LEASEHOLD_EVENT_LOG",
                                                      ".leasehold/events.jsonl"))
    tail.add_argument("-f", "--follow", action="store_true")
    tail.set_defaults(run=run_tail)


_FIELDS = ("cron", "task", "timezone", "name", "priority", "pool", "misfire_policy",
           "overlap_policy", "max_catch_up", "start_at", "end_at", "max_runs", "jitter_seconds")


def _body(args: argparse.Namespace) -> dict[str, Any]:
    body = {k: getattr(args, k) for k in _FIELDS if getattr(args, k) is not None}
    if args.payload is not None:
        body["payload"] = json.loads(args.payload)
    if getattr(args, "workflow", None) is not None:
        if args.workflow == "-":
            body["workflow"] = json.load(sys.stdin)
        else:
            with open(args.workflow) as handle:
                body["workflow"] = json.load(handle)
    return body


def run(args: argparse.Namespace) -> int:
    client = Client.from_args(args)
    path = f"/schedules/{getattr(args, 'schedule_id', '')}".rstrip("/")
    calls: dict[str, tuple[str, str, Any, Any]] = {
        "create": ("POST", "/schedules", "body", None),
        "update": ("PATCH", path, "body", None),
        "list": ("GET", "/schedules", None, {"limit": getattr(args, "limit", None),
                                             "cursor": getattr(args, "cursor", None)}),
        "get": ("GET", path, None, None),
        "delete": ("DELETE", path, None, None),
        "pause": ("POST", path + "/pause", None, None),
        "resume": ("POST", path + "/resume", None, None),
        "trigger": ("POST", path + "/trigger", None, None),
        "next": ("GET", path + "/next", None, {"count": getattr(args, "count", None)}),
        "jobs": ("GET", "/jobs", None, {"schedule_id": getattr(args, "schedule_id", None)}),
    }
    method, url, body, query = calls[args.action]
    try:
        reply = client.request(method, url, _body(args) if body else None, query=query)
    except ApiError as exc:
        return fail(exc)
    except (OSError, ValueError) as exc:  # an unreadable or invalid JSON file or payload
        print(f"error: {exc}", file=sys.stderr)
        return 1
    emit(args, reply, json.dumps(reply, indent=2) if reply is not None else "deleted")
    return 0


def run_tail(args: argparse.Namespace) -> int:
    from leasehold.events.publishing import tail

    try:
        for event in tail(args.log, follow=args.follow):
            detail = event["detail"]
            print(f"{event['time']}  {event['detail-type']:<16} {detail['job_id']}  "
                  f"{detail['task']}  {detail.get('previous_state') or '-'} -> {detail['state']}",
                  flush=True)
    except KeyboardInterrupt:
        pass
    return 0
