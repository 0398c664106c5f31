"""The few DynamoDB mechanics every table module shares.

Attribute-value codecs, paged index queries, batched reads, transactions retried through
conflicts, and telling a failed condition from any other error. The table modules
(``store``, ``schedule_store``, ``workflows.storage``, ...) hold what their writes mean; this
module holds only how DynamoDB is spoken to.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

#: A position in a listing, as DynamoDB's ``LastEvaluatedKey`` in plain values.
Cursor = Mapping[str, Any]


def to_av(value: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in value.items()}


def from_av(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def condition_failed(exc: ClientError) -> bool:
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def old_item(exc: ClientError) -> dict[str, Any] | None:
    """The item a failed condition saw ({} if none); None if the error is not a condition.

    Needs ``ReturnValuesOnConditionCheckFailure="ALL_OLD"`` on the request.
    """
    if not condition_failed(exc):
        return None
    item: dict[str, Any] = exc.response.get("Item") or {}  # type: ignore[assignment]
    return item


def query(ddb: Any, *, limit: int | None = None, **kwargs: Any) -> Iterator[dict[str, Any]]:
    """Every item a query matches (plain values), following pages, at most ``limit``."""
    if limit is not None:
        kwargs["Limit"] = min(limit, 1000)
    seen = 0
    while True:
        response = ddb.query(**kwargs)
        for item in response.get("Items", []):
            if limit is not None and seen >= limit:
                return
            seen += 1
            yield from_av(item)
        if "LastEvaluatedKey" not in response or (limit is not None and seen >= limit):
            return
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def query_page(ddb: Any, *, limit: int, cursor: Cursor | None = None, **kwargs: Any
               ) -> tuple[list[dict[str, Any]], Cursor | None]:
    """One page of a listing and the cursor of the next one (None at the end)."""
    kwargs["Limit"] = limit
    if cursor:
        kwargs["ExclusiveStartKey"] = to_av(cursor)
    response = ddb.query(**kwargs)
    last = response.get("LastEvaluatedKey")
    return [from_av(i) for i in response.get("Items", [])], (from_av(last) if last else None)


def batch_get(ddb: Any, table: str, key: str, ids: Sequence[str],
              key_of: Callable[[str], Mapping[str, Any]] | None = None
              ) -> list[dict[str, Any]]:
    """The items whose string attribute ``key`` is one of ``ids`` (plain values), in the order
    asked, missing ones left out. ``key_of``: an id's whole key, when the table's key is more
    than ``key`` (the jobs table: :func:`leasehold.aws.definitions.job_key`). Strongly
    consistent; retries unprocessed keys."""
    found: dict[str, dict[str, Any]] = {}
    make = key_of or (lambda i: {key: {"S": i}})
    for start in range(0, len(ids), 100):
        keys = [dict(make(i)) for i in dict.fromkeys(ids[start:start + 100])]
        request: dict[str, Any] = {table: {"Keys": keys, "ConsistentRead": True}}
        while request:
            response = ddb.batch_get_item(RequestItems=request)
            for raw in response["Responses"].get(table, []):
                item = from_av(raw)
                found[item[key]] = item
            request = response.get("UnprocessedKeys") or {}
    return [found[i] for i in ids if i in found]


def delete_partition(ddb: Any, table: str, pk: str) -> int:
    """Delete every item of partition ``pk`` (a table keyed ``pk``, ``sk``), 25 a batch,
    retrying unprocessed deletes; returns how many were found. Idempotent: a second call
    finds what the first left."""
    keys = [{"pk": {"S": pk}, "sk": {"S": str(item["sk"])}} for item in query(
        ddb, TableName=table, KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": pk}}, ProjectionExpression="pk, sk",
        ConsistentRead=True)]
    for start in range(0, len(keys), 25):
        pending: dict[str, Any] = {table: [{"DeleteRequest": {"Key": key}}
                                           for key in keys[start:start + 25]]}
        while pending:
            pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
    return len(keys)


#: Why DynamoDB cancels a transaction that may simply be tried again.
_TRANSIENT_CANCELLATIONS = frozenset({
    "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})


#: Errors DynamoDB answers for a write it did not apply: trying it again cannot apply it twice.
_NOT_APPLIED = frozenset({
    "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
    "ValidationException", "TransactionConflictException"})


def not_applied(exc: ClientError) -> bool:
    """DynamoDB refused the write without applying it (a throttle, a conflict, an invalid
    request), as opposed to an error that leaves its fate unknown (a 5xx, a timeout, a
    response lost past the retries)."""
    return exc.response.get("Error", {}).get("Code") in _NOT_APPLIED


def contended(exc: ClientError) -> bool:
    """The write overlapped another transaction on one of its items: a
    ``TransactionConflictException`` (a single-item write), or a transaction cancelled by a
    ``TransactionConflict`` (what :func:`transact_write` raises once its tries ran out).
    Never a failed condition: trying again, or on another item, may well succeed."""
    code = exc.response.get("Error", {}).get("Code")
    if code == "TransactionConflictException":
        return True
    reasons = exc.response.get("CancellationReasons") or []
    return code == "TransactionCanceledException" and any(
        reason.get("Code") == "TransactionConflict" for reason in reasons)


class Cancelled(Exception):
    """A transaction was cancelled by a failed condition.

    ``codes[i]`` is why item ``i`` was cancelled (``"None"``: its condition held),
    ``items[i]`` the item as DynamoDB saw it (with ``ReturnValuesOnConditionCheckFailure``)
    and ``messages[i]`` DynamoDB's words for it.
    """

    def __init__(self, codes: list[str], items: list[dict[str, Any] | None],
                 messages: list[str] | None = None) -> None:
        super().__init__(", ".join(codes))
        self.codes = codes
        self.items = items
        self.messages = messages or [""] * len(codes)

    def failed(self, index: int) -> bool:
        return index < len(self.codes) and self.codes[index] == "ConditionalCheckFailed"


def transact_write(ddb: Any, items: Sequence[Mapping[str, Any]], *, attempts: int = 8,
                   sleep: Callable[[float], None] = time.sleep) -> None:
    """``TransactWriteItems``, tried again while it is cancelled only by conflicts with other
    transactions or throttling (botocore retries neither). A failed condition raises
    :class:`Cancelled`.

    botocore sends one ``ClientRequestToken`` for all its retries of a call, and DynamoDB
    applies a repeated token once for ten minutes. Our own tries here are new calls, and a
    retried call whose first try landed is seen by its conditions anyway (moto ignores the
    token): every transaction we write conditions its main item, so it can never apply twice.
    """
    for attempt in range(attempts):
        try:
            ddb.transact_write_items(TransactItems=list(items))
            return
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons") or []
            codes = [str(reason.get("Code", "None")) for reason in reasons]
            if "ConditionalCheckFailed" in codes:
                raise Cancelled(codes, [from_av(reason["Item"]) if reason.get("Item") else None
                                        for reason in reasons],
                                [str(reason.get("Message") or "") for reason in reasons]
                                ) from None
            if attempt == attempts - 1 or not set(codes) & _TRANSIENT_CANCELLATIONS:
                raise
            sleep(random.uniform(0, min(1.0, 0.02 * 2 ** attempt)))


def update_request(table: str, key: Mapping[str, Any], *, sets: Mapping[str, Any],
                   removes: Sequence[str], increments: Mapping[str, int],
                   condition: Sequence[str], names: Mapping[str, str],
                   values: Mapping[str, Any]) -> dict[str, Any]:
    """An ``UpdateItem`` request (also a transaction's ``Update``): SET ``sets``, add
    ``increments`` (from 0 when absent), REMOVE ``removes``, all conditioned on ``condition``;
    the item as it was comes back when the condition fails."""
    names = dict(names)
    values = dict(values)
    parts = []
    for i, (name, value) in enumerate(sets.items()):
        names[f"#s{i}"] = name
        values[f":s{i}"] = value
        parts.append(f"#s{i} = :s{i}")
    for i, (name, amount) in enumerate(increments.items()):
        names[f"#i{i}"] = name
        values[f":i{i}"] = amount
        values[":zero"] = 0
        parts.append(f"#i{i} = if_not_exists(#i{i}, :zero) + :i{i}")
    expression = "SET " + ", ".join(parts) if parts else ""  # a REMOVE alone: no SET
    unique = list(dict.fromkeys(removes))
    if unique:
        names.update({f"#r{i}": name for i, name in enumerate(unique)})
        expression += " REMOVE " + ", ".join(f"#r{i}" for i in range(len(unique)))
    expression = expression.strip()
    return {"TableName": table, "Key": dict(key), "UpdateExpression": expression,
            "ConditionExpression": " AND ".join(condition),
            "ExpressionAttributeNames": names, "ExpressionAttributeValues": to_av(values),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}
