"""Workflow commands: ``leasehold workflow submit | status | list | cancel``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from leasehold.cli.client import ApiError, Client, add_client_options
from leasehold.cli.jobs import emit, fail
from leasehold.workflows.tree import render

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


def register(subparsers: Any) -> None:
    group = subparsers.add_parser(
        "workflow", aliases=["workflows"], help="multi-step jobs with dependencies",
        description="start, watch and cancel workflows (DAGs of steps)")
    actions = group.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, help: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=help, description=help)
        add_client_options(parser)
        parser.set_defaults(run=run, action=name)
        return parser

    submit = action("submit", "start a workflow from a JSON file ('-' reads stdin)")
    submit.add_argument("file", help='{"name": ..., "steps": [{"id", "task", "depends_on"}]}')
    submit.add_argument("--idempotency-key", help="a replay with this key finds the first")
    submit.add_argument("--wait", action="store_true", help="follow it until it finishes")
    status = action("status", "show a workflow's graph as a tree")
    status.add_argument("workflow_id")
    status.add_argument("--wait", action="store_true", help="follow it until it finishes")
    cancel = action("cancel", "cancel a workflow and its live steps")
    cancel.add_argument("workflow_id")
    listing = action("list", "list your workflows, newest first")
    listing.add_argument("--state", choices=["CREATING", "RUNNING", "SUCCEEDED", "FAILED",
                                             "CANCELLED"])
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--cursor")
    for parser in (submit, status):
        parser.add_argument("--interval", type=float, default=1.0, help=argparse.SUPPRESS)


def _read(path: str) -> Any:
    if path == "-":
        return json.load(sys.stdin)
    with open(path) as handle:
        return json.load(handle)


def run(args: argparse.Namespace) -> int:
    client = Client.from_args(args)
    try:
        if args.action == "submit":
            body = _read(args.file)
            if args.idempotency_key:
                body["idempotency_key"] = args.idempotency_key
            reply = client.request("POST", "/workflows", body)
        elif args.action == "status":
            reply = client.request("GET", f"/workflows/{args.workflow_id}")
        elif args.action == "cancel":
            reply = client.request("DELETE", f"/workflows/{args.workflow_id}")
        else:
            reply = client.request("GET", "/workflows", query={
                "state": args.state, "limit": args.limit, "cursor": args.cursor})
            emit(args, reply, _table(reply))
            return 0
        if getattr(args, "wait", False):
            reply = _follow(client, args, reply)
    except ApiError as exc:
        return fail(exc)
    except (OSError, ValueError) as exc:  # an unreadable or invalid JSON file
        print(f"error: {exc}", file=sys.stderr)
        return 1
    emit(args, reply, render(reply))
    # --wait is for scripts: the exit status says whether the workflow succeeded.
    return 1 if getattr(args, "wait", False) and reply["state"] != "SUCCEEDED" else 0


def _follow(client: Client, args: argparse.Namespace, reply: Any) -> Any:
    """Poll until the workflow finishes, redrawing the tree when it changes (text mode)."""
    shown = ""
    while reply["state"] not in TERMINAL:
        text = render(reply)
        if text != shown and not args.json:
            print(text + "\n", flush=True)
            shown = text
        time.sleep(args.interval)
        reply = client.request("GET", f"/workflows/{reply['workflow_id']}")
    return reply


def _table(page: Any) -> str:
    lines = [f"{'WORKFLOW':<26}  {'STATE':<9}  {'STEPS':>9}  {'CREATED':<24}  NAME"]
    for w in page["workflows"]:
        steps = f"{w['finished_steps']}/{w['step_count']}"
        lines.append(f"{w['workflow_id']:<26}  {w['state']:<9}  {steps:>9}  "
                     f"{w['created_at'] or '':<24}  {w['name'] or ''}")
    if page.get("next_cursor"):
        lines.append(f"more: --cursor {page['next_cursor']}")
    return "\n".join(lines)
