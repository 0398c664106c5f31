"""``leasehold conformance``: check a worker in any language against docs/protocol.md."""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any


def register(subparsers: Any) -> None:
    command = subparsers.add_parser(
        "conformance", help="check a worker command against the worker protocol",
        description="Start a local runtime with the conformance tasks external (pool conf), "
                    "run the worker command as each case needs, and print one line per case "
                    "and a summary; exit 1 if any case failed. The task set the worker runs "
                    "is docs/protocol.md, 'The conformance task set'.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  leasehold conformance --worker 'python -m leasehold.conformance.python_worker'\n"
               "  leasehold conformance --worker './my-worker --flag' --exclude priorities,kill\n"
               "  leasehold conformance --list")
    command.add_argument("--worker", metavar="CMD",
                         help="the worker command (split as a shell would, run without one), e.g. "
                              "--worker 'node dist/worker.js'")
    command.add_argument("--exclude", default="", metavar="CASE[,CASE]",
                         help="cases to skip (what the worker lacks), e.g. --exclude kill")
    command.add_argument("--language", default=None,
                         help="the language the results must name (default: any word), e.g. "
                              "--language go")
    command.add_argument("--list", action="store_true",
                         help="list the cases and exit, e.g. leasehold conformance --list")
    command.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from leasehold.conformance import cases
    from leasehold.conformance.run import run as run_cases

    if args.list:
        for case in cases.CASES:
            print(f"{case.name:<18} {case.about}")
        return 0
    if not args.worker:
        print("leasehold conformance: --worker CMD is needed (or --list)", file=sys.stderr)
        return 2
    exclude = [name.strip() for name in args.exclude.split(",") if name.strip()]
    try:
        cases.selected(exclude)
    except ValueError as exc:
        print(f"leasehold conformance: --exclude: {exc}", file=sys.stderr)
        return 2
    return run_cases(shlex.split(args.worker), exclude=exclude, out=sys.stdout,
                     language=args.language)
