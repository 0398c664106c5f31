"""What an attempt reports when DynamoDB refuses one of its ``ctx.transact`` entries.

The entries commit in a transaction Leasehold writes: the attempt's success (the worker's
finish) or a durable step's record. When an entry's own condition fails, the transaction is
cancelled and nothing of it is written; the attempt then fails as if its handler had raised
:class:`EffectRefused` (the job's retry policy applies), naming the entry, never leaving the
job RUNNING until its lease runs out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from leasehold.errors import LeaseholdError

#: Why DynamoDB cancelled an item whose write was fine (its condition held).
_HELD = ("None", "")


class EffectRefused(LeaseholdError):
    """DynamoDB refused an entry of ctx.transact: nothing of the transaction was written."""

    def __init__(self, message: str, *, index: int, table: str, code: str) -> None:
        super().__init__(message, index=index, table=table, code=code)
        self.index = index
        self.table = table
        self.code = code


def _shown(entry: Mapping[str, Any]) -> tuple[str, str, str]:
    action, body = next(iter(entry.items()))
    key = body.get("Key") if "Key" in body else body.get("Item")
    return action, str(body.get("TableName", "")), json.dumps(key, default=str)[:300]


def refused_entry(effects: Sequence[Mapping[str, Any]], codes: Sequence[str],
                  messages: Sequence[str], *, first: int, where: str) -> EffectRefused | None:
    """The first of ``effects`` a cancelled transaction refused, as the error the attempt
    fails with; None when none was (the cancellation was about Leasehold's own items).

    ``effects`` are items ``first`` to ``first + len(effects) - 1`` of the transaction;
    ``codes`` and ``messages`` are its cancellation reasons, by item; ``where`` names the
    transaction ("the job's success", "step 'charge'").
    """
    for index, entry in enumerate(effects):
        position = first + index
        if position >= len(codes) or codes[position] in _HELD:
            continue
        action, table, key = _shown(entry)
        message = messages[position] if position < len(messages) else ""
        return EffectRefused(
            f"ctx.transact entry {index} ({action} on table {table!r}, key {key}) was refused "
            f"in {where}: {codes[position]}{': ' + message if message else ''}; nothing of "
            "that transaction was written", index=index, table=table, code=codes[position])
    return None


#: What DynamoDB answers for a whole request it will not run (a malformed entry, an unknown
#: table): no cancellation by item, and no try will ever pass.
REJECTED = frozenset({"ValidationException", "ResourceNotFoundException"})


def rejected(code: str, message: str, *, where: str) -> EffectRefused:
    """The error an attempt fails with when DynamoDB rejects its transaction with entries in
    it as a whole (:data:`REJECTED`)."""
    return EffectRefused(
        f"ctx.transact entries were rejected in {where}: {code}: {message}; nothing of that "
        "transaction was written", index=-1, table="", code=code)
