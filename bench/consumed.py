"""DynamoDB capacity units as DynamoDB itself reports them (issue 32).

A botocore hook on an app's DynamoDB client adds ``ReturnConsumedCapacity="INDEXES"`` to
every request that takes it and sums the ``ConsumedCapacity`` of each answer (a list for
``TransactWriteItems``, ``TransactGetItems`` and the batch calls): write units from writes,
read units from reads, indexes included, by table and index. Nothing is computed from item
sizes (:mod:`bench.metering` does that, as a cross-check).

The authority is AWS's DynamoDB Local (``bench.substrate``'s ``dynamodb_local``). The
embedded emulator (moto) answers ``ReturnConsumedCapacity`` too, but with fixed figures
whatever the item size, index or transaction, so its units are not reported.

A write whose condition fails is an error, and an error carries no ``ConsumedCapacity``:
those are counted apart (``refused_writes``; AWS bills each at least one write unit).

One correction: DynamoDB Local reports a transaction's units per table as if items of the
same size on one table were one item (two puts of small items: 2 units, not 4; a 2-unit and a
1-unit item: 6), so a table's transactional units are taken as at least 2 per item written
there (Put, Update, Delete), what AWS bills for items under 1 KB (``corrected`` counts the
units added). Index units are as reported.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from leasehold.aws.clients import Clients

WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
READS = {"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"}


@dataclass
class Consumed:
    write_units: float = 0.0
    read_units: float = 0.0
    #: Units by ``table`` and ``table/index`` (writes and reads together, by kind prefix).
    by_target: Counter[str] = field(default_factory=Counter)
    #: Conditional writes DynamoDB refused (no capacity figure comes back with an error).
    refused_writes: int = 0
    #: Units added to transactions DynamoDB Local under-reported (see the module's doc).
    corrected: float = 0.0
    #: Units by operation (``UpdateItem``, ``TransactWriteItems``, ...), indexes included.
    by_operation: Counter[str] = field(default_factory=Counter)

    def minus(self, other: Consumed) -> Consumed:
        return Consumed(self.write_units - other.write_units,
                        self.read_units - other.read_units,
                        self.by_target - other.by_target,
                        self.refused_writes - other.refused_writes,
                        self.corrected - other.corrected,
                        self.by_operation - other.by_operation)


class CapacityHook:
    """Installed on every DynamoDB client of a :class:`~leasehold.aws.clients.Clients`."""

    def __init__(self) -> None:
        self._total = Consumed()
        self._lock = threading.Lock()

    def attach(self, clients: Clients) -> CapacityHook:
        clients.add_hook(self._install)
        return self

    def snapshot(self) -> Consumed:
        with self._lock:
            t = self._total
            return Consumed(t.write_units, t.read_units, Counter(t.by_target), t.refused_writes,
                            t.corrected, Counter(t.by_operation))

    def _install(self, client: Any) -> Any:
        if client.meta.service_model.service_name == "dynamodb":
            client.meta.events.register("provide-client-params.dynamodb", self._ask)
            client.meta.events.register("after-call.dynamodb", self._count)
        return client

    @staticmethod
    def _ask(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if model.name in WRITES | READS:
            params["ReturnConsumedCapacity"] = "INDEXES"
        # Items written per table, for the floor of 2 units each (see the module's doc).
        written: Counter[str] = Counter()
        for entry in params.get("TransactItems", []):
            for action in ("Put", "Update", "Delete"):
                if action in entry:
                    written[str(entry[action]["TableName"])] += 1
        context["bench_transaction_items"] = written

    def _count(self, parsed: Mapping[str, Any], model: Any, context: dict[str, Any],
               **_: Any) -> None:
        op = model.name
        if op not in WRITES | READS:
            return
        entries = parsed.get("ConsumedCapacity") or []
        if isinstance(entries, Mapping):
            entries = [entries]
        kind = "write" if op in WRITES else "read"
        units = corrected = 0.0
        targets: Counter[str] = Counter()
        written: Counter[str] = context.get("bench_transaction_items") or Counter()
        for entry in entries:
            total = float(entry.get("CapacityUnits") or 0.0)
            indexes = entry.get("GlobalSecondaryIndexes") or {}
            name = str(entry.get("TableName", "?"))
            # ``<prefix>-<role>`` or, from a table's second key schema on, ``-<role>-v<n>``.
            table = re.sub(r"-v\d+$", "", name).rsplit("-", 1)[-1]
            in_indexes = 0.0
            for index, figure in indexes.items():
                spent = float(figure.get("CapacityUnits") or 0.0)
                targets[f"{kind} {table}/{index}"] += spent
                in_indexes += spent
            own = total - in_indexes
            floor = 2.0 * written.get(name, 0)
            if own < floor:
                corrected += floor - own
                own = floor
            targets[f"{kind} {table}"] += own
            units += own + in_indexes
        refused = int(op in WRITES and bool((parsed.get("Error") or {}).get("Code")))
        with self._lock:
            if kind == "write":
                self._total.write_units += units
            else:
                self._total.read_units += units
            self._total.by_target.update(targets)
            self._total.refused_writes += refused
            self._total.corrected += corrected
            self._total.by_operation[op] += units
