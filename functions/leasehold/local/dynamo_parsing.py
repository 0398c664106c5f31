"""moto's update-expression parser, remembered in the embedded emulator.

moto parses every ``UpdateExpression`` from its text twice per ``UpdateItem`` (once to check
the request, once to run it), and the job store sends the same few expressions over and over
(a lease, a finish, a heartbeat differ only in their values, which are placeholders). Parsing
was about a third of the emulator's CPU for an ``UpdateItem``. Here the parse of each distinct
text is kept (bounded); moto never changes a parsed tree in place (its validator works on a
deep copy, which is why it makes one), so sharing it changes nothing but the time taken.
``tests/unit/test_dynamo_parsing.py`` runs the same updates with and without it.
"""

from __future__ import annotations

import functools
from typing import Any

#: Distinct update expressions kept (the store uses a few dozen).
KEPT = 1024


def install() -> None:
    """Remember moto's parses of update expressions in this process (idempotent)."""
    from moto.dynamodb.parsing.expressions import (  # type: ignore[attr-defined]
        UpdateExpressionParser,
    )

    parser: Any = UpdateExpressionParser
    if getattr(parser, "_leasehold_kept", False):
        return
    parse = parser.make.__func__

    @functools.lru_cache(maxsize=KEPT)
    def parsed(expression: str) -> Any:
        return parse(parser, expression)

    parser.make = classmethod(lambda cls, expression: parsed(expression))
    parser._leasehold_kept = True
