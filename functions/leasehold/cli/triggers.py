"""Trigger commands: ``leasehold triggers list | get | create | delete``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from leasehold.cli.client import ApiError, Client
from leasehold.cli.inputs import UsageError, read_json
from leasehold.cli.output import emit, fail, fields, short, table
from leasehold.cli.parsing import command, group


def register(subparsers: Any) -> None:
    actions = group(subparsers, "triggers", "event triggers: submit a job when an event "
                                            "matches a pattern", [
        "leasehold triggers list",
        "leasehold triggers create --pattern '{\"source\": [\"shop\"]}' --task echo "
        "--input-path '$.detail'"], aliases=["trigger"])
    command(actions, "list", "list your triggers", ["leasehold triggers list --json"],
            run, action="list")
    for name, help in (("get", "show a trigger"), ("delete", "delete a trigger")):
        command(actions, name, help, [f"leasehold triggers {name} 01JABCDEF0123456789ABCDEFG"],
                run, action=name).add_argument("trigger_id", help="the trigger's id")
    create = command(actions, "create", "create a trigger", [
        "leasehold triggers create --pattern '{\"source\": [\"shop\"]}' --task echo",
        "leasehold triggers create --pattern @pattern.json --task report "
        "--payload '{\"kind\": \"daily\"}'"], run, action="create")
    create.add_argument("--pattern", required=True,
                        help="an EventBridge event pattern as JSON or @file.json, e.g. "
                             "'{\"source\": [\"shop\"], \"detail-type\": [\"Order Placed\"]}'")
    what = create.add_mutually_exclusive_group(required=True)
    what.add_argument("--task", help="the task each match submits, e.g. echo")
    what.add_argument("--target", metavar="JSON",
                      help="a job with no code instead of a task (JSON or @file.json): "
                           "an HTTP target without a body is sent the event as its body, e.g. "
                           "--target '{\"http\": {\"url\": \"https://hooks.example/orders\"}}'")
    create.add_argument("--payload", help="a fixed payload (JSON or @file.json) instead of "
                                          "the event, e.g. '{\"kind\": \"daily\"}'")
    create.add_argument("--input-path", help="the part of the event that becomes the payload, "
                                             "e.g. '$.detail' (default: the whole event)")
    create.add_argument("--name", help="a name to recognise it by, e.g. 'orders'")
    create.add_argument("--priority", choices=["high", "normal", "low"],
                        help="the jobs' priority, e.g. --priority high")
    create.add_argument("--pool", help="the jobs' pool, e.g. --pool default")
    create.add_argument("--max-attempts", type=int, help="the jobs' attempts, e.g. 3")
    create.add_argument("--timeout", type=float, dest="timeout_seconds",
                        help="seconds per attempt, e.g. 60")


def _body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {"pattern": read_json("--pattern", args.pattern)}
    if args.target is not None:
        body["target"] = read_json("--target", args.target)
    else:
        body["task"] = args.task
    if args.payload is not None:
        body["payload"] = read_json("--payload", args.payload)
    for name in ("input_path", "name", "priority", "pool", "max_attempts", "timeout_seconds"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    return body


def show(trigger: dict[str, Any]) -> str:
    return fields([("trigger", trigger["trigger_id"]), ("name", trigger["name"] or None),
                   ("pattern", json.dumps(trigger["pattern"])), ("task", trigger["task"]),
                   ("target", json.dumps(trigger["target"]) if trigger.get("target") else None),
                   ("payload", short(trigger["payload"], 70) if trigger.get("payload")
                    is not None else f"the event at {trigger['input_path'] or '$'}"),
                   ("pool/priority", f"{trigger['pool']}/{trigger['priority']}"),
                   ("created", trigger["created_at"])])


def run(args: argparse.Namespace) -> int:
    client = Client.from_args(args)
    try:
        if args.action == "list":
            reply = client.request("GET", "/triggers")
            rows = [(t["trigger_id"], t["name"], t["task"], short(json.dumps(t["pattern"]), 50),
                     t["created_at"]) for t in reply["triggers"]]
            emit(args, reply, table(rows, ["TRIGGER", "NAME", "TASK", "PATTERN", "CREATED"]))
            return 0
        if args.action == "create":
            reply = client.request("POST", "/triggers", _body(args))
        elif args.action == "delete":
            client.request("DELETE", f"/triggers/{args.trigger_id}")
            emit(args, {"deleted": args.trigger_id}, f"deleted {args.trigger_id}")
            return 0
        else:
            reply = client.request("GET", f"/triggers/{args.trigger_id}")
    except (ApiError, UsageError) as exc:
        return fail(exc)
    emit(args, reply, show(reply))
    return 0
