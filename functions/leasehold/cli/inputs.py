"""JSON the user gives on the command line: inline, ``@file.json``, or ``-`` for stdin.

Anything that is not JSON is an error naming the argument (a typo such as ``'{"a":'`` must
not be sent as the string it happens to be); ``--raw`` sends a plain string on purpose.
"""

from __future__ import annotations

import json
import sys
from typing import Any


class UsageError(Exception):
    """An argument the CLI cannot use; the message names it."""

    def __init__(self, argument: str, message: str) -> None:
        self.argument = argument
        super().__init__(f"{argument}: {message}")


def read_file(argument: str, path: str) -> Any:
    """The JSON in ``path`` (``-``: stdin)."""
    try:
        if path == "-":
            return json.load(sys.stdin)
        with open(path) as handle:
            return json.load(handle)
    except OSError as exc:
        raise UsageError(argument, f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(argument, f"{path} is not JSON: {exc}") from None


def read_json(argument: str, text: str | None, *, raw: bool | None = None) -> Any:
    """``text`` as JSON, or the JSON in ``@file`` (``@-``: stdin); a plain string if ``raw``
    (None: the command has no ``--raw``)."""
    if text is None:
        return None
    if raw:
        return text
    if text.startswith("@"):
        return read_file(argument, text[1:])
    try:
        return json.loads(text)
    except ValueError as exc:
        hint = "" if raw is None else ", or pass --raw to send it as a plain string"
        raise UsageError(argument, f"not JSON ({exc}): quote a string as "
                                   f"'\"text\"'{hint}") from None
