"""Schedule commands: ``leasehold schedules create | update | list | get | delete | pause |
resume | trigger | next | jobs``; tables for people, ``--json`` for scripts."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any

from leasehold.cli.client import ApiError, Client
from leasehold.cli.inputs import UsageError, read_file, read_json
from leasehold.cli.output import (
    emit,
    fail,
    fields,
    jobs_table,
    more,
    short,
    show_job,
    table,
    tree,
)
from leasehold.cli.parsing import command, group

ID = "01JABCDEF0123456789ABCDEFG"


def register(subparsers: Any) -> None:
    actions = group(subparsers, "schedules", "manage cron schedules", [
        "leasehold schedules create --cron '*/2 * * * * *' --task ping",
        "leasehold schedules list", f"leasehold schedules next {ID} --count 5"],
        aliases=["schedule"])

    def action(name: str, help: str, examples: list[str]) -> argparse.ArgumentParser:
        parser = command(actions, name, help, examples, run, action=name)
        if name not in ("create", "list"):
            parser.add_argument("schedule_id", help="the schedule's id, as create printed it")
        return parser

    for name, help, examples in (
        ("create", "create a schedule", [
            "leasehold schedules create --cron '30 2 * * *' --timezone Europe/London "
            "--task report --payload '{\"kind\": \"daily\"}'",
            "leasehold schedules create --cron 'rate(5 minutes)' --task ping",
            "leasehold schedules create --cron '0 2 * * *' --workflow diamond.json"]),
        ("update", "change a schedule's fields in place", [
            f"leasehold schedules update {ID} --cron '@hourly' --payload '{{\"v\": 2}}'"]),
    ):
        parser = action(name, help, examples)
        parser.add_argument("--cron", help="5-field cron, 6-field with leading seconds, "
                                           "@hourly-style or rate(), e.g. '*/5 * * * *', "
                                           "'*/2 * * * * *', '@hourly', 'rate(5 minutes)'")
        parser.add_argument("--task", help="the task each run submits, e.g. --task report")
        parser.add_argument("--payload", help="the runs' payload: JSON or @file.json, e.g. "
                                              "'{\"kind\": \"daily\"}'")
        parser.add_argument("--workflow", metavar="FILE.json",
                            help="start this workflow instead of a job: the body of "
                                 "'workflow submit' ('-' reads stdin), e.g. diamond.json")
        parser.add_argument("--timezone", help="IANA zone, e.g. Europe/London (default UTC)")
        parser.add_argument("--name", help="a name to recognise it by, e.g. 'nightly report'")
        parser.add_argument("--priority", choices=["high", "normal", "low"],
                            help="the runs' priority, e.g. --priority high")
        parser.add_argument("--pool", help="the runs' pool, e.g. --pool default")
        parser.add_argument("--misfire-policy", choices=["skip", "fire_once", "catch_up"],
                            help="what to do with times missed while down, e.g. catch_up")
        parser.add_argument("--overlap-policy", choices=["allow", "forbid", "replace"],
                            help="what to do while the previous run is live, e.g. forbid")
        parser.add_argument("--max-catch-up", type=int,
                            help="with catch_up: how many missed runs at most, e.g. 3")
        parser.add_argument("--start-at", help="first possible time, ISO-8601 with a zone, "
                                               "e.g. 2027-01-01T00:00:00Z")
        parser.add_argument("--end-at", help="last possible time, ISO-8601 with a zone, "
                                             "e.g. 2027-12-31T23:59:59Z")
        parser.add_argument("--max-runs", type=int, help="stop after this many runs, e.g. 10")
        parser.add_argument("--jitter", type=float, dest="jitter_seconds",
                            help="start each run up to this many seconds late, e.g. 30")
    listing = action("list", "list your schedules", [
        "leasehold schedules list", "leasehold schedules list --json | jq -r "
        "'.schedules[].schedule_id'"])
    listing.add_argument("--limit", type=int, default=50,
                         help="at most this many (1-200), e.g. --limit 10")
    listing.add_argument("--cursor", help="the next page: what the last page printed "
                                          "after 'more:', e.g. --cursor eyJj...")
    for name, help in (("get", "show a schedule"), ("delete", "delete a schedule"),
                       ("pause", "pause a schedule"), ("resume", "resume a schedule"),
                       ("trigger", "run the schedule's job (or workflow) now, once")):
        action(name, help, [f"leasehold schedules {name} {ID}"])
    runs = action("jobs", "list the schedule's runs, newest first (future ones say when "
                          "they are due)",
                  [f"leasehold schedules jobs {ID} --state DEAD --limit 10"])
    runs.add_argument("--state", action="append",
                      choices=["SCHEDULED", "WAITING", "QUEUED", "RUNNING", "SUCCEEDED", "DEAD",
                               "CANCELLED"],
                      help="only runs in this state (repeat for several), e.g. --state DEAD")
    runs.add_argument("--limit", type=int, default=50,
                      help="look at this many runs (1-200), e.g. --limit 10")
    runs.add_argument("--cursor", help="the next page: what the last page printed after "
                                       "'more:', e.g. --cursor eyJj...")
    action("next", "preview the next fire times", [f"leasehold schedules next {ID} --count 5"]
           ).add_argument("--count", type=int, default=5, help="how many, e.g. --count 10")


_FIELDS = ("cron", "task", "timezone", "name", "priority", "pool", "misfire_policy",
           "overlap_policy", "max_catch_up", "start_at", "end_at", "max_runs", "jitter_seconds")


def _body(args: argparse.Namespace) -> dict[str, Any]:
    body = {k: getattr(args, k) for k in _FIELDS if getattr(args, k) is not None}
    if args.payload is not None:
        body["payload"] = read_json("--payload", args.payload)
    if getattr(args, "workflow", None) is not None:
        body["workflow"] = read_file("--workflow", args.workflow)
    return body


def show(schedule: dict[str, Any]) -> str:
    what = (f"workflow {schedule['workflow'].get('name') or ''} "
            f"({len(schedule['workflow']['steps'])} steps)" if schedule.get("workflow")
            else f"{schedule['task']} {short(schedule.get('payload'), 50)}")
    last = schedule.get("last_job_id") or schedule.get("last_workflow_id")
    return fields([
        ("schedule", schedule["schedule_id"]), ("name", schedule["name"] or None),
        ("state", schedule["state"]), ("cron", f"{schedule['cron']} ({schedule['timezone']})"),
        ("runs", what), ("next", schedule.get("next_fire_at")),
        ("last", f"{schedule['last_fired_at']} {last}" if schedule.get("last_fired_at")
         else None),
        ("count", f"{schedule['run_count']} run(s), {schedule['skipped_count']} skipped"),
        ("policies", f"misfire {schedule['misfire_policy']}, overlap "
                     f"{schedule['overlap_policy']}"),
        ("failing", f"{schedule.get('failures')} time(s), next try {schedule.get('retry_at')}: "
                    f"{schedule.get('last_error')}" if schedule.get("last_error") else None),
    ])


def _schedules_table(page: dict[str, Any]) -> str:
    rows = [(s["schedule_id"], s["name"],
             f"{s['state']} (failing)" if s.get("last_error") else s["state"], s["cron"],
             s["timezone"],
             s.get("task") or "(workflow)", s.get("next_fire_at"), s["run_count"])
            for s in page["schedules"]]
    return table(rows, ["SCHEDULE", "NAME", "STATE", "CRON", "ZONE", "TASK", "NEXT",
                        "RUNS"]) + more(page)


def _times(reply: dict[str, Any], now: datetime | None = None) -> str:
    """Each time in UTC and in the schedule's own zone (not this machine's), and how soon."""
    now = now or datetime.now(UTC)
    zone = reply.get("timezone") or "UTC"
    local = reply.get("local_times") or reply["times"]
    rows = []
    for text, there in zip(reply["times"], local, strict=False):
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
        rows.append((text, there, due_in((at - now).total_seconds())))
    return table(rows, ["UTC", zone.upper(), "DUE"])


def due_in(seconds: float) -> str:
    """``in 4 h 12 min``, ``in 3 d 2 h``, ``in 45 s``, ``now``: the two largest units."""
    left = int(max(0.0, seconds))
    if left == 0:
        return "now"
    parts = []
    for size, unit in ((86_400, "d"), (3600, "h"), (60, "min"), (1, "s")):
        if left >= size:
            parts.append(f"{left // size} {unit}")
            left %= size
        elif parts:
            break  # "1 h 0 min" reads as "1 h"
        if len(parts) == 2:
            break
    return "in " + " ".join(parts)


def run(args: argparse.Namespace) -> int:
    client = Client.from_args(args)
    path = f"/schedules/{getattr(args, 'schedule_id', '')}".rstrip("/")
    calls: dict[str, tuple[str, str, Any]] = {
        "create": ("POST", "/schedules", None),
        "update": ("PATCH", path, None),
        "list": ("GET", "/schedules", {"limit": getattr(args, "limit", None),
                                       "cursor": getattr(args, "cursor", None)}),
        "get": ("GET", path, None),
        "delete": ("DELETE", path, None),
        "pause": ("POST", path + "/pause", None),
        "resume": ("POST", path + "/resume", None),
        "trigger": ("POST", path + "/trigger", None),
        "next": ("GET", path + "/next", {"count": getattr(args, "count", None)}),
        "jobs": ("GET", "/jobs", {"schedule_id": getattr(args, "schedule_id", None),
                                  "state": getattr(args, "state", None),
                                  "limit": getattr(args, "limit", None),
                                  "cursor": getattr(args, "cursor", None)}),
    }
    method, url, query = calls[args.action]
    try:
        body = _body(args) if args.action in ("create", "update") else None
        reply = client.request(method, url, body, query=query)
    except (ApiError, UsageError) as exc:
        return fail(exc)
    if args.action == "delete":
        text = f"deleted {args.schedule_id}"
    elif args.action == "list":
        text = _schedules_table(reply)
    elif args.action == "next":
        text = _times(reply)
    elif args.action == "jobs":
        text = jobs_table(reply["jobs"]) + more(reply)
    elif args.action == "trigger":
        text = tree(reply) if "workflow_id" in reply else show_job(reply)
    else:
        text = show(reply)
    emit(args, reply, text)
    return 0
