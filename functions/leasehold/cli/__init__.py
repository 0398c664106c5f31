"""The ``leasehold`` command: each module adds its subcommands with ``register(subparsers)``.

Adding a group of commands is one line in :data:`MODULES`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from leasehold import __version__
from leasehold.cli import console, dev, jobs, schedules, workflows

MODULES = (
    dev,
    jobs,
    schedules,
    workflows,
    console,
)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="leasehold", description="Leasehold: a job scheduler built from AWS services.")
    root.add_argument("--version", action="version", version=f"leasehold {__version__}")
    root.add_argument("-v", "--verbose", action="store_true", help="log debug output")
    subparsers = root.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in MODULES:
        module.register(subparsers)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    # Console scripts do not put the working directory on the path; task modules named
    # with --tasks usually live there.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    code: int = args.run(args)
    return code
