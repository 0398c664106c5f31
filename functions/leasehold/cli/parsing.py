"""The shape every command takes: a help line, a description, examples under ``--help``,
and (for commands that call the API) the client options."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from leasehold.cli.client import add_client_options


def command(subparsers: Any, name: str, help: str, examples: Sequence[str],
            run: Callable[[argparse.Namespace], int] | None = None, *, client: bool = True,
            aliases: Sequence[str] = (), **defaults: Any) -> argparse.ArgumentParser:
    """A subcommand whose ``--help`` ends with examples; ``client`` adds --url and friends."""
    epilog = "examples:\n" + "\n".join(f"  {line}" for line in examples)
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help, description=help[0].upper() + help[1:] + ".", epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter, aliases=list(aliases))
    if client:
        add_client_options(parser)
    if run is not None:
        parser.set_defaults(run=run, **defaults)
    return parser


def group(subparsers: Any, name: str, help: str, examples: Sequence[str], *,
          aliases: Sequence[str] = ()) -> Any:
    """A command with actions of its own (``leasehold schedules list``)."""
    parser = command(subparsers, name, help, examples, client=False, aliases=aliases)
    return parser.add_subparsers(dest="action", metavar="ACTION", required=True)
