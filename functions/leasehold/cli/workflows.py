"""Workflow commands: ``leasehold workflow submit | status | list | cancel``."""

from __future__ import annotations

import argparse
import time
from typing import Any

from leasehold.cli.client import ApiError, Client
from leasehold.cli.inputs import UsageError, read_file
from leasehold.cli.output import emit, fail, tree
from leasehold.cli.parsing import command, group

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}
ID = "01JABCDEF0123456789ABCDEFG"


def register(subparsers: Any) -> None:
    actions = group(subparsers, "workflow", "multi-step jobs with dependencies: start, watch "
                                            "and cancel workflows (DAGs of steps)", [
        "leasehold workflow submit diamond.json --wait",
        f"leasehold workflow status {ID}"], aliases=["workflows"])

    def action(name: str, help: str, examples: list[str]) -> argparse.ArgumentParser:
        return command(actions, name, help, examples, run, action=name)

    submit = action("submit", "start a workflow from a JSON file ('-' reads stdin)", [
        "leasehold workflow submit diamond.json --wait",
        "cat diamond.json | leasehold workflow submit - --idempotency-key nightly-42"])
    submit.add_argument("file", help='the workflow as JSON, e.g. diamond.json: {"name": ..., '
                                     '"steps": [{"id", "task", "depends_on"}]}')
    submit.add_argument("--idempotency-key",
                        help="a replay with this key finds the first, e.g. nightly-42")
    submit.add_argument("--wait", action="store_true",
                        help="follow it until it finishes; exit 1 unless it SUCCEEDED")
    status = action("status", "show a workflow's graph as a tree",
                    [f"leasehold workflow status {ID} --wait"])
    status.add_argument("workflow_id", help="the workflow's id, as submit printed it")
    status.add_argument("--wait", action="store_true",
                        help="follow it until it finishes; exit 1 unless it SUCCEEDED")
    cancel = action("cancel", "cancel a workflow and its live steps",
                    [f"leasehold workflow cancel {ID}"])
    cancel.add_argument("workflow_id", help="the workflow's id")
    retry = action("retry", "resume a FAILED or CANCELLED workflow: re-run its failed and "
                            "cancelled steps and everything downstream",
                   [f"leasehold workflow retry {ID} --wait"])
    retry.add_argument("workflow_id", help="the workflow's id")
    retry.add_argument("--wait", action="store_true",
                       help="follow it until it finishes; exit 1 unless it SUCCEEDED")
    listing = action("list", "list your workflows, newest first",
                     ["leasehold workflow list --state RUNNING"])
    listing.add_argument("--state", choices=["CREATING", "RUNNING", "SUCCEEDED", "FAILED",
                                             "CANCELLED"],
                         help="only this state, e.g. --state FAILED")
    listing.add_argument("--limit", type=int, default=50,
                         help="at most this many (1-200), e.g. --limit 10")
    listing.add_argument("--cursor", help="the next page: what the last page printed after "
                                          "'more:', e.g. --cursor eyJj...")
    for parser in (submit, status, retry):
        parser.add_argument("--interval", type=float, default=1.0, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    client = Client.from_args(args)
    try:
        if args.action == "submit":
            body = read_file("file", args.file)
            if args.idempotency_key:
                body["idempotency_key"] = args.idempotency_key
            reply = client.submit_workflow(body)
        elif args.action == "status":
            reply = client.get_workflow(args.workflow_id)
        elif args.action == "cancel":
            reply = client.cancel_workflow(args.workflow_id)
        elif args.action == "retry":
            reply = client.retry_workflow(args.workflow_id)
        else:
            reply = client.list_workflows(state=args.state, limit=args.limit,
                                          cursor=args.cursor)
            emit(args, reply, _table(reply))
            return 0
        if getattr(args, "wait", False):
            reply = _follow(client, args, reply)
    except (ApiError, UsageError) as exc:
        return fail(exc)
    emit(args, reply, tree(reply))
    # --wait is for scripts: the exit status says whether the workflow succeeded.
    return 1 if getattr(args, "wait", False) and reply["state"] != "SUCCEEDED" else 0


def _follow(client: Client, args: argparse.Namespace, reply: Any) -> Any:
    """Poll until the workflow finishes, redrawing the tree when it changes (text mode)."""
    shown = ""
    while reply["state"] not in TERMINAL:
        text = tree(reply)
        if text != shown and not args.json:
            print(text + "\n", flush=True)
            shown = text
        time.sleep(args.interval)
        reply = client.get_workflow(reply["workflow_id"])
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
