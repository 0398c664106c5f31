"""moto's DynamoDB item responses, written straight as JSON in the embedded emulator.

moto (5.x) builds every response through a generic, model-driven serializer that walks the
operation's output shape value by value. DynamoDB's item operations already hold their result
in wire form (attribute values as ``{"S": ...}`` maps), so for them that walk only re-creates
the same JSON, slowly: it was the largest share of the emulator's CPU per job (an
``UpdateItem`` returning a job row took ~14 ms, most of it in the serializer). Here those
operations' results are dumped directly; everything else (errors, table descriptions with
timestamps) keeps moto's serializer. So does the change stream's ``GetRecords``
(:func:`install_streams`): a page of records holds whole row images, and walking them was a
third of the emulator's CPU under 8 API clients (py-spy, issue 32's throughput).
``tests/unit/test_dynamo_responses.py`` checks that both produce the same JSON for every
operation listed, including binary and nested values.

Only the embedded emulator installs this (:func:`leasehold.local.emulator.serve`); nothing
of AWS's behaviour changes, only how fast moto writes an answer it has already computed.
"""

from __future__ import annotations

import base64
import calendar
import datetime
import json
from typing import Any

#: Operations that answer with items (their results are dicts of attribute values, counts
#: and keys). The write-only batch and transaction calls answer little and keep moto's path.
ITEM_OPERATIONS = frozenset({
    "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem",
    "TransactGetItems",
})
CONTENT_TYPE = "application/x-amz-json-1.0"


def _plain(value: Any) -> bool:
    """Only JSON's own types and blobs, so the JSON is what the serializer would write."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    return value is None or isinstance(value, (str, int, float, bool, bytes))


def _blob(value: Any) -> str | int | float:
    """Binary attribute values go out base64-encoded, as the serializer writes blobs; a
    record's (naive UTC) time as epoch seconds to the millisecond, as it writes timestamps."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime.datetime):
        seconds = calendar.timegm(value.timetuple())
        return seconds + (value.microsecond // 1000) / 1000.0 if value.microsecond else seconds
    raise TypeError(f"not JSON: {type(value).__name__}")


def _answer(handler: Any, body: dict[str, Any]) -> tuple[int, dict[str, str], str]:
    headers = {"Content-Type": CONTENT_TYPE, **handler.response_headers}
    return 200, headers, json.dumps(body, separators=(",", ":"), default=_blob)


def _patch(handler_type: type, direct: Any) -> None:
    """Answer through ``direct(handler, action_result)`` where it gives a body, through moto's
    serializer where it gives None (idempotent; the tests compare the two)."""
    if getattr(handler_type, "_leasehold_direct", False):
        return
    generic = handler_type.serialized  # type: ignore[attr-defined]

    def serialized(self: Any, action_result: Any) -> Any:
        body = direct(self, action_result)
        return generic(self, action_result) if body is None else _answer(self, body)

    patched: Any = handler_type  # a patch on purpose: typed loosely
    patched._leasehold_generic = generic
    patched.serialized = serialized
    patched._leasehold_direct = True


def install() -> None:
    """Make moto's DynamoDB handler write item results directly (idempotent)."""
    from moto.core.responses import get_service_model
    from moto.dynamodb.responses import DynamoHandler, DynamoResult

    members: dict[str, frozenset[str]] = {}

    def output_members(action: str) -> frozenset[str]:
        """The top-level keys the output shape has (the serializer writes no others)."""
        if action not in members:
            shape = get_service_model("dynamodb").operation_model(action).output_shape
            members[action] = frozenset(shape.members if shape is not None else ())
        return members[action]

    def direct(self: Any, action_result: Any) -> dict[str, Any] | None:
        result = action_result.result
        action = self._get_action()
        if (type(action_result) is DynamoResult and isinstance(result, dict)
                and action in ITEM_OPERATIONS and _plain(result)):
            known = output_members(action)
            return {key: value for key, value in result.items() if key in known}
        return None

    _patch(DynamoHandler, direct)


def install_streams() -> None:
    """Make moto's DynamoDB Streams handler write ``GetRecords`` pages directly (idempotent)."""
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    def direct(self: Any, action_result: Any) -> dict[str, Any] | None:
        result = action_result.result
        return result if self._get_action() == "GetRecords" and isinstance(result, dict) \
            else None

    _patch(DynamoDBStreamsHandler, direct)
