"""Callback commands: ``leasehold callback complete TOKEN VALUE | fail TOKEN ERROR``."""

from __future__ import annotations

import argparse
from typing import Any

from leasehold.cli.client import ApiError, Client
from leasehold.cli.inputs import UsageError, read_json
from leasehold.cli.output import emit, fail, fields
from leasehold.cli.parsing import command, group


def register(subparsers: Any) -> None:
    actions = group(subparsers, "callback", "complete or fail a durable job's callback", [
        "leasehold callback complete 01JABC...:9f2c...:approve '{\"ok\": true}'"],
        aliases=["callbacks"])
    complete = command(actions, "complete", "complete a callback with a value", [
        "leasehold callback complete TOKEN '{\"approved\": true}'",
        "leasehold callback complete TOKEN @value.json"], run, action="complete")
    complete.add_argument("token", help="the callback's token (cb.token in the handler)")
    complete.add_argument("value", nargs="?", default="null",
                          help="the value as JSON or @file.json (default: null)")
    failing = command(actions, "fail", "fail a callback with an error", [
        "leasehold callback fail TOKEN 'rejected by ann'"], run, action="fail")
    failing.add_argument("token", help="the callback's token")
    failing.add_argument("error", help="what went wrong, e.g. 'rejected'")


def run(args: argparse.Namespace) -> int:
    client = Client.from_args(args)
    try:
        if args.action == "complete":
            reply = client.complete_callback(args.token, read_json("value", args.value))
        else:
            reply = client.complete_callback(args.token, error=args.error)
    except (ApiError, UsageError) as exc:
        return fail(exc)
    said = "done" if reply["changed"] else "nothing changed: it was already " + reply["outcome"]
    emit(args, reply, fields([("job", reply["job_id"]), ("callback", reply["callback"]),
                              ("outcome", reply["outcome"]), ("", said)]))
    return 0
