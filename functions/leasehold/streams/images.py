"""The row images of a jobs table stream record, decoded as AWS writes them and as DynamoDB
Local does.

DynamoDB Local writes an empty map in a stream image as ``{}``, with no type, where the
table itself (and AWS's stream) has ``{"M": {}}``: every job written through the API has
``labels: {}``. Such a value is read here as the empty map it is. A record that still cannot
be read (a row that is not a job's as this version knows it) raises :class:`Undecodable`:
the relay stops before it, and it is retried, then set aside (see
:mod:`leasehold.streams.relay`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leasehold.aws.dynamo import from_av
from leasehold.core.jobs import Job, job_from_item
from leasehold.errors import LeaseholdError

Record = Mapping[str, Any]


class Undecodable(LeaseholdError):
    """A stream record whose row image cannot be read as a job."""


def _typed(value: Any) -> Any:
    """``value`` with every untyped empty map (DynamoDB Local's) typed as one."""
    if isinstance(value, Mapping):
        if not value:
            return {"M": {}}
        if "M" in value and isinstance(value["M"], Mapping):
            return {"M": {k: _typed(v) for k, v in value["M"].items()}}
        if "L" in value and isinstance(value["L"], list):
            return {"L": [_typed(v) for v in value["L"]]}
    return value


def image(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """A stream image's attributes as plain values (a row's, as ``from_av`` reads one)."""
    return from_av({name: _typed(value) for name, value in attributes.items()})


def job_of(record: Record, which: str = "NewImage") -> Job | None:
    """The job row in ``record``'s image ``which`` (None: no image, or not a job's row).
    Raises :class:`Undecodable`."""
    attributes = record.get("dynamodb", {}).get(which)
    if not attributes or "state" not in attributes:
        return None
    try:
        return job_from_item(image(attributes))
    except Exception as exc:
        raise Undecodable(f"stream record {sequence_number(record)}: {which} is not a job "
                          f"row ({type(exc).__name__}: {exc})",
                          sequence_number=sequence_number(record)) from exc


def sequence_number(record: Record) -> str:
    return str(record.get("dynamodb", {}).get("SequenceNumber", "?"))
