"""Counting AWS requests by operation and DynamoDB capacity units, with botocore event hooks.

Requests are counted per API call (``after-call``, which fires for failed conditions too).
Capacity units are *computed* from item sizes, because moto answers ``ReturnConsumedCapacity``
with fixed values whatever the item size. The rules are DynamoDB's on-demand ones:

* item size: attribute-name bytes + value bytes (strings UTF-8, numbers
  ``ceil(significant digits / 2) + 1``, booleans and nulls 1, lists and maps 3 + 1 per
  element + their contents);
* a write costs ``ceil(max(size before, size after) / 1 KB)`` write units (at least 1; a
  failed condition still costs the write);
* each global secondary index costs extra writes: 1 when an item enters or leaves the index,
  2 when an index key changes (delete + put), 1 when only projected attributes change, each
  ``ceil(index entry / 1 KB)`` where the entry is index keys + table key + projected
  attributes + 100 bytes of overhead;
* a consistent ``GetItem`` costs ``ceil(size / 4 KB)`` read units (eventual: half), a
  ``BatchGetItem`` that per item, a ``Query`` ``ceil(sum of returned sizes / 4 KB)`` (at least
  one unit; index queries are always eventually consistent: half).

To know the sizes before and after each write, the meter reads the item with its own,
unhooked client just before the write is sent and just after it returns.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from leasehold.aws.clients import Clients
from leasehold.aws.definitions import TABLES, Index, TableDefinition
from leasehold.settings import Settings

WRITE_UNIT = 1024
READ_UNIT = 4096
INDEX_OVERHEAD = 100
WRITES = {"PutItem", "UpdateItem", "DeleteItem"}
#: Writes whose units the meter does not model (none are on the measured paths).
UNMODELLED_WRITES = {"BatchWriteItem", "TransactWriteItems", "ExecuteStatement",
                     "BatchExecuteStatement", "ExecuteTransaction"}

Item = Mapping[str, Any]  # DynamoDB attribute-value form: {"name": {"S": "..."}}


# -- sizes -----------------------------------------------------------------------------------

def _number_size(text: str) -> int:
    digits = Decimal(text).normalize().as_tuple().digits
    significant = len(digits) if any(digits) else 1
    return math.ceil(significant / 2) + 1 + (1 if text.strip().startswith("-") else 0)


def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one attribute value (without its name)."""
    ((kind, raw),) = value.items()
    if kind == "S":
        return len(str(raw).encode())
    if kind == "N":
        return _number_size(str(raw))
    if kind == "B":
        return len(raw)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in raw)
    if kind == "NS":
        return sum(_number_size(n) for n in raw)
    if kind == "BS":
        return sum(len(b) for b in raw)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in raw)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in raw.items())
    raise ValueError(f"unknown attribute type {kind!r}")


def item_size(item: Item | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def write_units(size: int) -> int:
    return max(1, math.ceil(size / WRITE_UNIT))


def read_units(size: int, *, consistent: bool) -> float:
    units = max(1, math.ceil(size / READ_UNIT))
    return float(units) if consistent else units / 2


# -- index writes ----------------------------------------------------------------------------

def _key_names(table: TableDefinition) -> list[str]:
    return [k.name for k in (table.partition, table.sort) if k is not None]


def _index_keys(index: Index) -> list[str]:
    return [k.name for k in (index.partition, index.sort) if k is not None]


def index_entry(table: TableDefinition, index: Index, item: Item | None) -> dict[str, Any] | None:
    """What the index holds for ``item`` (None: the item is not in this sparse index)."""
    if not item or any(name not in item for name in _index_keys(index)):
        return None
    if index.projection == "ALL":
        return dict(item)
    names = set(_index_keys(index)) | set(_key_names(table))
    if index.projection == "INCLUDE":
        names |= set(index.include)
    return {name: item[name] for name in names if name in item}


def index_write_units(table: TableDefinition, before: Item | None, after: Item | None
                      ) -> dict[str, int]:
    """Write units each index of ``table`` consumes for one write from ``before`` to ``after``."""
    units: dict[str, int] = {}
    for index in table.indexes:
        old = index_entry(table, index, before)
        new = index_entry(table, index, after)

        def cost(entry: Mapping[str, Any]) -> int:
            return write_units(item_size(entry) + INDEX_OVERHEAD)

        if old is None and new is None:
            continue
        if old is None and new is not None:
            spent = cost(new)
        elif new is None and old is not None:
            spent = cost(old)
        else:
            assert old is not None and new is not None
            keys = _index_keys(index)
            if any(old.get(k) != new.get(k) for k in keys):
                spent = cost(old) + cost(new)
            elif old != new:
                spent = cost(new)
            else:
                continue
        units[index.name] = spent
    return units


# -- the meter -------------------------------------------------------------------------------

Tally = dict[str, float]


def _merge(into: Tally, other: Tally, sign: float = 1.0) -> None:
    for key, value in other.items():
        into[key] = into.get(key, 0.0) + sign * value
        if not into[key]:
            del into[key]


@dataclass
class Usage:
    """Requests by ``service.Operation`` and capacity units by table (and ``table/index``)."""

    requests: Tally = field(default_factory=dict)
    write_units: Tally = field(default_factory=dict)
    read_units: Tally = field(default_factory=dict)
    unmodelled: Tally = field(default_factory=dict)
    #: DynamoDB requests by ``Operation table`` (which table each request went to).
    by_table: Tally = field(default_factory=dict)
    #: EventBridge entries published (what EventBridge bills), by operation.
    event_entries: Tally = field(default_factory=dict)

    def add(self, other: Usage, sign: float = 1.0) -> None:
        for name in ("requests", "write_units", "read_units", "unmodelled", "by_table",
                     "event_entries"):
            _merge(getattr(self, name), getattr(other, name), sign)

    def total_requests(self, service: str | None = None) -> float:
        return sum(n for op, n in self.requests.items()
                   if service is None or op.startswith(service + "."))

    def total_write_units(self) -> float:
        return float(sum(self.write_units.values()))

    def total_read_units(self) -> float:
        return float(sum(self.read_units.values()))

    def minus(self, other: Usage) -> Usage:
        out = Usage()
        out.add(self)
        out.add(other, -1.0)
        return out

    def per(self, count: int) -> dict[str, Any]:
        """Everything divided by ``count`` (jobs), rounded for a report."""
        def scaled(tally: Tally) -> dict[str, float]:
            return {k: round(v / count, 3) for k, v in sorted(tally.items())}

        return {
            "requests": round(self.total_requests() / count, 3),
            "requests_by_operation": scaled(self.requests),
            "dynamodb_requests": round(self.total_requests("dynamodb") / count, 3),
            "sqs_requests": round(self.total_requests("sqs") / count, 3),
            "eventbridge_requests": round(self.total_requests("events") / count, 3),
            "eventbridge_entries": round(sum(self.event_entries.values()) / count, 3),
            "write_units": round(self.total_write_units() / count, 3),
            "write_units_by_table": scaled(self.write_units),
            "read_units": round(self.total_read_units() / count, 3),
            "read_units_by_table": scaled(self.read_units),
            "unmodelled_writes": scaled(self.unmodelled),
            "dynamodb_requests_by_table": scaled(self.by_table),
        }


class Meter:
    """Hooks a :class:`~leasehold.aws.clients.Clients`' DynamoDB, SQS and EventBridge clients."""

    def __init__(self, clients: Clients, settings: Settings) -> None:
        self.settings = settings
        self.usage = Usage()
        #: Off: hooks do nothing (timing runs must not pay for the meter's own reads).
        self.enabled = True
        self._lock = threading.Lock()
        self._tables = {t.table_name(settings): t for t in TABLES}
        # Reads item images for the unit arithmetic; its requests are not counted.
        self._side = Clients(settings).dynamodb
        for service in ("dynamodb", "sqs", "events"):
            events = clients.client(service).meta.events
            events.register(f"provide-client-params.{service}", self._before)
            events.register(f"after-call.{service}", self._after)

    def reset(self) -> Usage:
        """Start counting afresh; returns what was counted so far."""
        with self._lock:
            usage, self.usage = self.usage, Usage()
        return usage

    # -- hooks -------------------------------------------------------------------------

    def _key(self, table: TableDefinition, params: Mapping[str, Any]) -> dict[str, Any] | None:
        source = params.get("Key") or params.get("Item") or {}
        key = {name: source[name] for name in _key_names(table) if name in source}
        return key if len(key) == len(_key_names(table)) else None

    def _image(self, table_name: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
        item = self._side.get_item(TableName=table_name, Key=dict(key),
                                   ConsistentRead=True).get("Item")
        return dict(item) if item else None

    def _before(self, params: Mapping[str, Any], model: Any, context: dict[str, Any],
                **_: Any) -> None:
        if not self.enabled or model.service_model.service_name != "dynamodb":
            return
        context["bench_params"] = dict(params)
        if model.name not in WRITES:
            return
        table = self._tables.get(str(params.get("TableName")))
        key = self._key(table, params) if table is not None else None
        if table is None or key is None:
            return
        context["bench_write"] = (table, key, self._image(str(params["TableName"]), key))

    def _after(self, parsed: Mapping[str, Any], model: Any, context: dict[str, Any],
               **_: Any) -> None:
        if not self.enabled:
            return
        service = model.service_model.service_name
        op = model.name
        usage = Usage(requests={f"{service}.{op}": 1})
        if service == "dynamodb":
            name = str(context.get("bench_params", {}).get("TableName", "?"))
            table = self._tables.get(name)
            usage.by_table[f"{op} {table.role if table else name}"] = 1
            self._units(op, parsed, context, usage)
        if service == "events" and op == "PutEvents":  # one request holds up to 10 entries
            published = len(parsed.get("Entries", [])) - int(parsed.get("FailedEntryCount", 0))
            usage.event_entries[op] = published
        with self._lock:
            self.usage.add(usage)

    def _units(self, op: str, parsed: Mapping[str, Any], context: Mapping[str, Any],
               usage: Usage) -> None:
        params = context.get("bench_params", {})
        if op in WRITES and "bench_write" in context:
            table, key, before = context["bench_write"]
            after = self._image(table.table_name(self.settings), key)
            name = table.role
            _merge(usage.write_units,
                   {name: write_units(max(item_size(before), item_size(after)))})
            _merge(usage.write_units, {f"{name}/{index}": units for index, units
                                       in index_write_units(table, before, after).items()})
        elif op in UNMODELLED_WRITES:
            _merge(usage.unmodelled, {op: 1})
        elif op == "GetItem":
            table = self._tables.get(str(params.get("TableName")))
            consistent = bool(params.get("ConsistentRead"))
            _merge(usage.read_units, {table.role if table else "other": read_units(
                item_size(parsed.get("Item")), consistent=consistent)})
        elif op == "BatchGetItem":
            for table_name, items in (parsed.get("Responses") or {}).items():
                table = self._tables.get(table_name)
                for item in items:
                    _merge(usage.read_units, {table.role if table else "other": read_units(
                        item_size(item), consistent=True)})
        elif op == "Query":
            table = self._tables.get(str(params.get("TableName")))
            index = params.get("IndexName")
            consistent = bool(params.get("ConsistentRead")) and not index
            size = sum(item_size(i) for i in parsed.get("Items", []))
            label = (table.role if table else "other") + (f"/{index}" if index else "")
            _merge(usage.read_units, {label: read_units(size, consistent=consistent)})

