"""moto's ``TransactWriteItems``, undone item by item in the embedded emulator.

To undo a cancelled transaction, moto deep-copies *every table the transaction names*
before it starts, on every call. An admission writes the job row and the tenant's item in one
transaction, so each ``POST /jobs`` copied the whole jobs table: the API slowed down as the
table grew (2.5 jobs/s through the local API with a few hundred jobs stored). Here the copy is
of the items the transaction names only; a cancelled transaction puts exactly those back
(or removes the ones it created), which is all a rollback needs, since a transaction writes
nothing else. The emulator serialises DynamoDB requests, so one transaction runs at a time.

A table's stream is put back too. moto's own rollback restores a copy of the whole table,
stream shard included; undoing item by item, the records the cancelled transaction's writes
appended to the shard stayed, so the stream carried an INSERT of a job row that never
existed. An admission whose tenant item refused it (a ``tat`` fallen behind, a full item)
then showed as a ``Job Queued`` event for an id that answers 404, and the retried admission's
row (a new id) as a second one (issue 44). A rollback now cuts each named table's shard back
to its length before the transaction.
``tests/unit/test_dynamo_transactions.py`` checks commits and rollbacks against moto's own.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

_undoing = threading.local()


class _Copier:
    """moto's ``copy`` module as its transaction code sees it: a table is not copied while
    our own per-item undo is in place (every other deep copy is the real one)."""

    def __init__(self, table_type: type) -> None:
        self._table_type = table_type

    def deepcopy(self, value: Any, memo: Any = None) -> Any:
        if getattr(_undoing, "active", False) and isinstance(value, self._table_type):
            return value  # the rollback "restores" the same table; we put its items back
        return copy.deepcopy(value, memo)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


def _locate(backend: Any, op_type: str, op: dict[str, Any]) -> tuple[Any, Any, Any] | None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    table = backend.tables.get(op.get("TableName"))
    if table is None:
        return None
    source = op["Item"] if op_type == "Put" else op.get("Key", {})
    if table.hash_key_attr not in source:
        return None
    hash_value = DynamoType(source[table.hash_key_attr])
    range_value = (DynamoType(source[table.range_key_attr])
                   if table.range_key_attr and table.range_key_attr in source else None)
    return table, hash_value, range_value


def _restore(table: Any, hash_value: Any, range_value: Any, saved: Any) -> None:
    if range_value is not None:
        rows = table.items[hash_value]
        if saved is None:
            rows.pop(range_value, None)
        else:
            rows[range_value] = saved
    elif saved is None:
        table.items.pop(hash_value, None)
    else:
        table.items[hash_value] = saved


def _shard_mark(table: Any) -> tuple[Any, list[Any], int] | None:
    """The table's stream shard, its list of records, and how many it holds now."""
    shard = getattr(table, "stream_shard", None)
    if shard is None:
        return None
    return shard, shard.items, len(shard.items)


def _cut(shard: Any, records: list[Any], length: int) -> None:
    # The records appended since the mark are the cancelled transaction's own (one request at
    # a time); moto replaces the list only when it hands records to a Lambda mapping, which
    # the emulator has none of, so a replaced list is left as it is.
    if shard.items is records:
        del records[length:]


def install() -> None:
    """Make moto's transactions undo only the items they name (idempotent)."""
    from moto.dynamodb import models
    from moto.dynamodb.models.table import Table

    backend_type: Any = models.DynamoDBBackend
    if getattr(backend_type, "_leasehold_item_undo", False):
        return
    patched: Any = models
    patched.copy = _Copier(Table)
    transact = backend_type.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        saved = []
        marks: dict[int, tuple[Any, list[Any], int]] = {}
        for entry in transact_items:
            if len(entry) != 1:
                return transact(self, transact_items)  # moto's own error, its own way
            op_type, op = next(iter(entry.items()))
            found = _locate(self, op_type, op)
            if found is None:
                return transact(self, transact_items)
            table, hash_value, range_value = found
            try:
                item = table.get_item(hash_value, range_value)
            except Exception:
                return transact(self, transact_items)
            saved.append((table, hash_value, range_value, copy.deepcopy(item)))
            if id(table) not in marks and (mark := _shard_mark(table)) is not None:
                marks[id(table)] = mark
        _undoing.active = True
        try:
            transact(self, transact_items)
        except Exception:
            for table, hash_value, range_value, item in reversed(saved):
                _restore(table, hash_value, range_value, item)
            for shard, records, length in marks.values():
                _cut(shard, records, length)
            raise
        finally:
            _undoing.active = False

    backend_type.transact_write_items = transact_write_items
    backend_type._leasehold_item_undo = transact


def uninstall() -> None:
    """Put moto's own transactions back (what a test compares against; idempotent)."""
    from moto.dynamodb import models

    backend_type: Any = models.DynamoDBBackend
    original = getattr(backend_type, "_leasehold_item_undo", None)
    if not original:
        return
    patched: Any = models
    patched.copy = copy
    backend_type.transact_write_items = original
    del backend_type._leasehold_item_undo
