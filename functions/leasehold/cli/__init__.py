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
from leasehold.cli import (
    admin,
    bulk,
    callbacks,
    cells,
    conformance,
    console,
    dev,
    events,
    flow,
    init,
    jobs,
    replay,
    schedules,
    triggers,
    workflows,
)

MODULES = (
    init,
    dev,
    jobs,
    bulk,
    admin,
    schedules,
    triggers,
    workflows,
    events,
    flow,
    cells,
    console,
    callbacks,
    replay,
    conformance,
)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="leasehold", description="Leasehold: a job scheduler built from AWS services.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  leasehold dev\n  leasehold submit echo '{\"hi\": 1}' --wait\n"
               "  leasehold list --state DEAD\n  leasehold COMMAND --help   # each command's "
               "options and examples")
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
    try:
        args = parser().parse_args(argv)
        logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        code: int = args.run(args)
    except BrokenPipeError:
        return _reader_gone()
    except SystemExit:  # --help, --version or a usage error: its text must get out too
        if not _flushed():
            return _reader_gone()
        raise
    return code if _flushed() else _reader_gone()


def _flushed() -> bool:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return False
    return True


def _reader_gone() -> int:
    """The reader went away (`leasehold list | head -1`): stop quietly, as `cat` does.
    stdout now points at /dev/null, so the interpreter's flush at exit cannot fail again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 141  # what a shell reports for a command killed by SIGPIPE
