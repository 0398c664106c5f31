"""The few DynamoDB mechanics every table module shares.

Attribute-value codecs, paged index queries, batched reads, and telling a failed condition
from any other error. The table modules (``store``, ``schedule_store``, ``workflows.storage``,
...) hold what their writes mean; this module holds only how DynamoDB is spoken to.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
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


def batch_get(ddb: Any, table: str, key: str, ids: Sequence[str]) -> list[dict[str, Any]]:
    """The items with these string keys (plain values), in the order asked, missing ones left
    out. Strongly consistent; retries unprocessed keys."""
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(ids), 100):
        keys = [{key: {"S": i}} for i in dict.fromkeys(ids[start:start + 100])]
        request: dict[str, Any] = {table: {"Keys": keys, "ConsistentRead": True}}
        while request:
            response = ddb.batch_get_item(RequestItems=request)
            for raw in response["Responses"].get(table, []):
                item = from_av(raw)
                found[item[key]] = item
            request = response.get("UnprocessedKeys") or {}
    return [found[i] for i in ids if i in found]
