"""One scan per table per invariant check: the lifecycle machine's invariants read the same
tables after every step (the jobs table five times, the tenants' items a dozen), and those
reads were most of its time. Within one ``check_invariants`` pass nothing writes, so each
table is read once, consistently, and every invariant sees that same snapshot. Rules, the
drain and anything outside the pass read the table afresh."""

from __future__ import annotations

from typing import Any


class Snapshots:
    inspect: Any
    _snapshots: dict[str, list[dict[str, Any]]] | None = None

    def check_invariants(self, *args: Any, **kwargs: Any) -> None:
        self._snapshots = {}
        try:
            super().check_invariants(*args, **kwargs)  # type: ignore[misc]
        finally:
            self._snapshots = None

    def table_items(self, table: str) -> list[dict[str, Any]]:
        """Every item of ``table`` (attribute-value form), read consistently; once per
        invariant pass."""
        if self._snapshots is not None and table in self._snapshots:
            return self._snapshots[table]
        pages = self.inspect.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
        items = [raw for page in pages for raw in page["Items"]]
        if self._snapshots is not None:
            self._snapshots[table] = items
        return items

    def table_item(self, table: str, key: str, value: str) -> dict[str, Any]:
        """The item whose string key ``key`` is ``value`` ({} if none), from the snapshot."""
        return next((raw for raw in self.table_items(table) if raw[key].get("S") == value), {})
