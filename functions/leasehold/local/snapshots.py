"""One consistent cut of the embedded emulator's DynamoDB tables, taken inside the emulator.

The runtime used to save its tables by scanning them one after another through the API while
the API and the workers kept writing. That is not a snapshot: a job admitted between the scan
of the jobs and the scan of the tenants was saved without its row but with its slot (a slot
held by a job that does not exist: a tenant at its cap got 429 for ever), and a job that
finished between them was saved live with its slot already given back (it ran again after a
restore and gave the slot back again: ``live = -1``). Here the emulator copies every table it
is asked for while it holds the lock that serialises its DynamoDB requests
(:class:`leasehold.local.emulator.AtomicRequests`), so the copy is one cut: each transaction
is in it whole or not at all, as in a DynamoDB export.

The emulator also counts the DynamoDB requests that may write; a request that says the count
it last saw (``unless``) gets no tables back while nothing was written since, so the runtime
can ask once a second and save only when something changed.

``POST /_leasehold/snapshot`` with ``{"region": ..., "tables": [...], "unless": n}`` answers
``{"sequence": n, "tables": {name: [item, ...]}}`` (items in DynamoDB's JSON), or
``{"sequence": n, "unchanged": true}``.
"""

from __future__ import annotations

import base64
import json
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
SNAPSHOT_PATH = "/_leasehold/snapshot"
#: DynamoDB operations that never write; every other one counts as a possible write.
_READS = ("Get", "BatchGet", "TransactGet", "Query", "Scan", "Describe", "List")


def writes(target: str) -> bool:
    """Whether a DynamoDB request (its ``X-Amz-Target``) may change an item or a table."""
    operation = target.partition(".")[2]
    return not operation.startswith(_READS)


class Lock(Protocol):
    """What the snapshot needs of :class:`~leasehold.local.emulator.AtomicRequests`."""

    dynamodb: Any
    dynamodb_writes: int


def _blob(value: Any) -> str:
    """Binary attribute values as DynamoDB's JSON writes them (base64)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"not JSON: {type(value).__name__}")


class Snapshots:
    """WSGI middleware: answers :data:`SNAPSHOT_PATH` under the DynamoDB request lock."""

    def __init__(self, app: WSGIApp, atomic: Lock) -> None:
        self.app = app
        self.atomic = atomic

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]
                 ) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != SNAPSHOT_PATH:
            return self.app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        try:
            request = json.loads(environ["wsgi.input"].read(length) or b"{}")
            body = self._answer(str(request["region"]), [str(t) for t in request["tables"]],
                                request.get("unless"))
            status = "200 OK"
        except (ValueError, KeyError, TypeError) as exc:
            body, status = json.dumps({"error": str(exc)}).encode(), "400 Bad Request"
        start_response(status, [("Content-Type", "application/json"),
                                ("Content-Length", str(len(body)))])
        return [body]

    def _answer(self, region: str, names: list[str], unless: Any) -> bytes:
        with self.atomic.dynamodb:
            sequence = self.atomic.dynamodb_writes
            if unless == sequence:
                return json.dumps({"sequence": sequence, "unchanged": True}).encode()
            tables = _tables(region, names)
            copied = {name: [item.to_json()["Attributes"] for item in table.all_items()]
                      for name, table in tables.items()}
            # Written inside the lock: a set attribute's list is moto's own, which a later
            # ADD could change while we wrote it out.
            return json.dumps({"sequence": sequence, "tables": copied},
                              separators=(",", ":"), default=_blob).encode()


def _tables(region: str, names: list[str]) -> dict[str, Any]:
    """moto's tables of these names in ``region`` (of whichever account holds them all)."""
    from moto.dynamodb.models import dynamodb_backends

    for account in dict.values(dynamodb_backends):  # the accounts in use; creates none
        backend = dict.get(account, region)
        if backend is not None and all(name in backend.tables for name in names):
            return {name: backend.tables[name] for name in names}
    raise KeyError(f"no tables {', '.join(names)} in {region}")


@dataclass(frozen=True)
class Snapshot:
    sequence: int
    #: None when nothing was written since the sequence the caller gave.
    tables: dict[str, list[dict[str, Any]]] | None


def take(endpoint: str, region: str, tables: Iterable[str], *, unless: int | None = None,
         timeout: float = 120.0) -> Snapshot:
    """The emulator's tables as one cut, or none (``tables`` None) if unchanged since
    ``unless``."""
    request = urllib.request.Request(
        endpoint + SNAPSHOT_PATH, method="POST", headers={"Content-Type": "application/json"},
        data=json.dumps({"region": region, "tables": list(tables), "unless": unless}).encode())
    with urllib.request.urlopen(request, timeout=timeout) as response:
        answer = json.loads(response.read())
    return Snapshot(int(answer["sequence"]), None if answer.get("unchanged") else
                    answer["tables"])
