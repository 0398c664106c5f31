"""``leasehold replay`` and ``leasehold export-histories`` (issue 36): check the code about to
be deployed against the recorded histories of live durable jobs, before it is deployed.

``replay`` runs each job's handler from this machine's task modules (``--tasks``) in-process,
answering every durable call from the job's history and calling no step's function (see
:mod:`leasehold.durable.replay`); it exits 1 if any job would stop as ``NonDeterministic``
(or its task is gone, or its handler raises outside a step). The histories come from the API
(``GET /jobs/{id}/history``: a deployed stack or ``leasehold dev``) or from a file that
``export-histories`` wrote (CI without access to the stack).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from leasehold.cli.client import ApiError, Client
from leasehold.cli.inputs import UsageError
from leasehold.cli.output import fail
from leasehold.cli.parsing import command
from leasehold.errors import ValidationError

#: Jobs waiting in a durable call (a sleep, a callback, children): what --all-waiting reads.
WAITING = "SLEEPING"


def register(subparsers: Any) -> None:
    check = command(subparsers, "replay", "check the task code here against live durable "
                    "jobs' histories: exit 1 if any would stop as non-deterministic", [
                        "leasehold replay --tasks myapp.tasks --all-waiting",
                        "leasehold replay --tasks myapp.tasks --job 01JABCDEF0123456789ABCDEFG",
                        "leasehold replay --tasks myapp.tasks --file histories.jsonl"],
                    run_replay)
    _sources(check, files=True)
    check.add_argument("--tasks", default=os.environ.get("LEASEHOLD_TASKS"),
                       help="comma-separated task modules to check (default: "
                            "$LEASEHOLD_TASKS), e.g. --tasks myapp.tasks")
    export = command(subparsers, "export-histories", "write live durable jobs' histories as "
                     "JSON lines, for leasehold replay --file", [
                         "leasehold export-histories --all-waiting > histories.jsonl",
                         "leasehold export-histories --job 01JABC... --output h.jsonl"],
                     run_export)
    _sources(export, files=False)
    export.add_argument("--output", "-o", help="write to this file (default: stdout), e.g. "
                                               "--output histories.jsonl")


def _sources(parser: argparse.ArgumentParser, *, files: bool) -> None:
    parser.add_argument("--job", action="append", default=[], metavar="ID",
                        help="this job (repeat for several), e.g. --job 01JABCDEF0123456789ABCDEFG")
    parser.add_argument("--all-waiting", action="store_true",
                        help=f"every {WAITING} durable job (sleeping, or waiting for a "
                             "callback or children)")
    if files:
        parser.add_argument("--file", help="histories from leasehold export-histories, e.g. "
                                           "--file histories.jsonl")


def _documents(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    # Imported here: the CLI starts without boto3 (tests/unit/test_cold_start.py).
    from leasehold.durable.replay import parse_lines

    if getattr(args, "file", None):
        try:
            text = Path(args.file).read_text()
        except OSError as exc:
            raise UsageError("--file", f"cannot read {args.file}: {exc}") from None
        try:
            yield from parse_lines(text)
        except ValidationError as exc:
            raise UsageError("--file", str(exc)) from None
        return
    if not args.job and not args.all_waiting:
        raise UsageError("jobs", "say which: --job ID, --all-waiting"
                         + (" or --file FILE" if hasattr(args, "file") else ""))
    client = Client.from_args(args)
    for job_id in args.job:
        yield client.history(job_id)
    if args.all_waiting:
        cursor = None
        while True:
            page = client.list(state=WAITING, limit=200, cursor=cursor)
            for job in page["jobs"]:
                if job["job_id"] not in args.job:
                    document = client.history(job["job_id"])
                    if document["records"]:  # a durable job (it has a history)
                        yield document
            cursor = page.get("next_cursor")
            if not cursor:
                return


def run_replay(args: argparse.Namespace) -> int:
    from leasehold.core.registry import default_registry, load_modules
    from leasehold.durable.replay import replay

    if not args.tasks:
        return fail(UsageError("--tasks", "say which task code to check, e.g. --tasks "
                               "myapp.tasks (or $LEASEHOLD_TASKS)"))
    try:
        load_modules([m.strip() for m in args.tasks.split(",") if m.strip()])
    except ValidationError as exc:
        return fail(UsageError("--tasks", str(exc)))
    verdicts = []
    try:
        for document in _documents(args):
            verdict = replay(default_registry, document)
            verdicts.append(verdict)
            if not args.json:
                mark = "ok  " if verdict.ok else "FAIL"
                print(f"{mark} {verdict.job_id} {verdict.task}: {verdict.detail}", flush=True)
    except (ApiError, UsageError) as exc:
        return fail(exc)
    failed = [v for v in verdicts if not v.ok]
    if args.json:
        print(json.dumps({"checked": len(verdicts), "failed": len(failed),
                          "jobs": [v.view() for v in verdicts]}, indent=2))
    else:
        print(f"replayed {len(verdicts)} job(s): "
              + (f"{len(failed)} would stop (see FAIL above)" if failed else
                 "every one replays on this code"))
    return 1 if failed else 0


def run_export(args: argparse.Namespace) -> int:
    out = open(args.output, "w") if args.output else sys.stdout  # noqa: SIM115
    count = 0
    try:
        for document in _documents(args):
            out.write(json.dumps(document, separators=(",", ":")) + "\n")
            count += 1
    except (ApiError, UsageError) as exc:
        return fail(exc)
    finally:
        if args.output:
            out.close()
    print(f"exported {count} history(ies)", file=sys.stderr)
    return 0
