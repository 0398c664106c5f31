"""Durations in seconds as every option takes them: 0 where 0 means "none", otherwise at
least a millisecond (the resolution of every time Leasehold keeps) and at most the option's
bound.

The millisecond floor is not only tidiness: a DynamoDB number is at least 1e-130 in size,
and boto3's serializer raises ``decimal.Underflow`` for a smaller one, so a duration such as
``1e-131`` would pass a plain ``>= 0`` check and then fail the write (a 500, and a workflow
left CREATING). Refused here, it is a 422 before anything is written. The API's schema states
the same rule (``leasehold.api.models``).
"""

from __future__ import annotations

from leasehold.errors import ValidationError

#: The shortest duration other than 0: one millisecond.
MIN_SECONDS = 0.001


def check_seconds(fieldname: str, value: object, *, high: float, zero_ok: bool = False,
                  low: float = MIN_SECONDS) -> float:
    """``value`` as a float: 0 when ``zero_ok``, else from ``low`` (at least a millisecond)
    to ``high``; a :class:`ValidationError` naming ``fieldname`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(fieldname, "must be a number")
    low = max(low, MIN_SECONDS)
    if zero_ok and value == 0:
        return 0.0
    if value != value or not low <= value <= high:  # NaN fails the first test
        floor = f"0 or between {low:g}" if zero_ok else f"between {low:g}"
        raise ValidationError(fieldname, f"must be {floor} and {high:g}")
    return float(value)
