"""Flow control commands: ``flow keys``, ``flow pause KEY``, ``flow resume KEY``."""

from __future__ import annotations

import argparse
import urllib.parse
from typing import Any

from leasehold.cli.client import ApiError, Client
from leasehold.cli.output import emit, fail, table
from leasehold.cli.parsing import command, group


def register(subparsers: Any) -> None:
    flow = group(subparsers, "flow", "concurrency keys: usage, pause, resume",
                 ["leasehold flow keys", "leasehold flow pause stripe:acct_1"])
    command(flow, "keys", "your concurrency keys: slots in use, limit, waiting jobs",
            ["leasehold flow keys", "leasehold flow keys --json"], run_keys)
    for name, verb in (("pause", "start nothing with KEY until resumed (nothing is lost)"),
                       ("resume", "let KEY's waiting jobs start again")):
        command(flow, name, verb, [f"leasehold flow {name} stripe:acct_1"],
                run_pause if name == "pause" else run_resume
                ).add_argument("key", help="the key, as the jobs name it (rendered)")


def _row(key: dict[str, Any]) -> tuple[Any, ...]:
    return (key["key"], f"{key['in_use']}/{key.get('limit') or '-'}",
            "paused" if key.get("paused") else "-", key["waiting"])


def run_keys(args: argparse.Namespace) -> int:
    try:
        reply = Client.from_args(args).request("GET", "/flow/keys")
    except ApiError as exc:
        return fail(exc)
    rows = [_row(k) for k in reply["keys"]]
    emit(args, reply, table(rows, ["KEY", "IN USE", "PAUSED", "WAITING"]) if rows
         else "no concurrency keys")
    return 0


def _toggle(args: argparse.Namespace, action: str) -> int:
    path = f"/flow/keys/{urllib.parse.quote(args.key, safe='')}/{action}"
    try:
        key = Client.from_args(args).request("POST", path)
    except ApiError as exc:
        return fail(exc)
    emit(args, key, table([_row(key)], ["KEY", "IN USE", "PAUSED", "WAITING"]))
    return 0


def run_pause(args: argparse.Namespace) -> int:
    return _toggle(args, "pause")


def run_resume(args: argparse.Namespace) -> int:
    return _toggle(args, "resume")
