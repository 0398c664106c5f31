"""Schedule expressions and their fire times (pure: every function takes the times it needs).

Accepted expressions:

- standard 5-field cron (``minute hour day-of-month month day-of-week``),
- 6-field cron with a leading seconds field (``second minute hour ...``, as Quartz and Spring),
- the aliases ``@yearly`` ``@annually`` ``@monthly`` ``@weekly`` ``@daily`` ``@midnight``
  ``@hourly``,
- ``rate(n unit)`` with unit ``second(s)``, ``minute(s)``, ``hour(s)`` or ``day(s)``.

Cron expressions are read in an IANA time zone. DST follows EventBridge Scheduler: a local
time that does not exist (spring forward) is skipped, a local time that happens twice (fall
back) fires once, at its first occurrence. Rates are fixed intervals of real time, so DST
does not touch them; they count from ``start_at`` (or the schedule's creation).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from croniter import CroniterBadDateError, CroniterError, croniter

from leasehold.errors import ValidationError

ALIASES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_RATE = re.compile(r"^rate\(\s*(\d+)\s+([a-z]+)\s*\)$")
_RATE_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
MAX_EXPRESSION_LENGTH = 256
#: Candidates examined per search before giving up: a per-second cron crossing a repeated
#: (fall-back) hour skips at most 3,600 of them, so this only stops truly empty expressions.
_MAX_STEPS = 20_000


@dataclass(frozen=True)
class Expression:
    """A parsed, valid schedule expression."""

    text: str
    kind: Literal["cron", "rate"]
    #: The croniter expression (aliases expanded) for cron; None for rate.
    cron: str | None = None
    seconds_field: bool = False
    #: The interval of a rate, in milliseconds.
    period_ms: int = 0


def parse(text: object, field: str = "cron") -> Expression:
    """Parse and validate ``text``; a :class:`ValidationError` names ``field`` if it is bad."""
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(field, "must be a non-empty string")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ValidationError(field, f"must be at most {MAX_EXPRESSION_LENGTH} characters")
    normal = " ".join(text.strip().split())
    lowered = normal.lower()
    if lowered.startswith("rate("):
        return _parse_rate(normal, lowered, field)
    if normal.startswith("@"):
        if lowered not in ALIASES:
            raise ValidationError(field, f"unknown alias {normal!r}; known: {', '.join(ALIASES)}")
        return Expression(text=lowered, kind="cron", cron=ALIASES[lowered])
    fields = normal.split(" ")
    if len(fields) not in (5, 6):
        raise ValidationError(
            field, f"a cron expression has 5 fields (or 6 with leading seconds), not {len(fields)}")
    seconds = len(fields) == 6
    try:
        croniter(normal, datetime(2026, 1, 1), second_at_beginning=seconds)
    except (CroniterError, ValueError, KeyError) as exc:
        raise ValidationError(field, f"invalid cron expression {normal!r}: {exc}") from None
    expression = Expression(text=normal, kind="cron", cron=normal, seconds_field=seconds)
    # An expression such as "0 0 31 2 *" parses but never fires: refuse it now, not at a tick.
    try:
        _naive_iter(expression, datetime(2026, 1, 1)).get_next(datetime)
    except CroniterBadDateError:
        raise ValidationError(field, f"{normal!r} never fires") from None
    return expression


def _parse_rate(normal: str, lowered: str, field: str) -> Expression:
    match = _RATE.match(lowered)
    if not match:
        raise ValidationError(field, f"a rate looks like 'rate(5 minutes)', not {normal!r}")
    value, unit = int(match.group(1)), match.group(2)
    base = unit[:-1] if unit.endswith("s") else unit
    if base not in _RATE_UNITS:
        raise ValidationError(field, f"unknown rate unit {unit!r}; use seconds, minutes, "
                                     "hours or days")
    if value < 1:
        raise ValidationError(field, "a rate must be at least 1")
    period = value * _RATE_UNITS[base]
    if period > 366 * 86400:
        raise ValidationError(field, "a rate must be at most one year")
    return Expression(text=f"rate({value} {unit})", kind="rate", period_ms=period * 1000)


@cache
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones()) | {"UTC"}


def zone(name: object, field: str = "timezone") -> ZoneInfo:
    """An IANA time zone, or a :class:`ValidationError` naming ``field``."""
    if not isinstance(name, str) or not name:
        raise ValidationError(field, "must be an IANA time zone name such as 'Europe/London'")
    # available_timezones() rejects paths and stray files under the tz directory that
    # ZoneInfo() would happily open.
    if name not in _zone_names():
        raise ValidationError(field, f"unknown time zone {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(field, f"unknown time zone {name!r}") from None


@dataclass(frozen=True)
class Timing:
    """When a schedule fires: its expression, zone and bounds (all times UTC epoch ms)."""

    expression: Expression
    timezone: str = "UTC"
    start_at: int | None = None
    end_at: int | None = None
    #: Where a rate counts from when there is no ``start_at`` (the schedule's creation).
    anchor: int = 0

    def next_after(self, after: int) -> int | None:
        """The first fire time strictly after ``after``, or None if there is none."""
        if self.start_at is not None and after < self.start_at:
            after = self.start_at - 1  # start_at itself may fire
        found = (_rate_next(self, after) if self.expression.kind == "rate"
                 else _cron_next(self.expression, _tz(self.timezone), after))
        if found is None or (self.end_at is not None and found > self.end_at):
            return None
        return found

    def upcoming(self, after: int, count: int) -> list[int]:
        """Up to ``count`` fire times strictly after ``after``."""
        times: list[int] = []
        cursor: int | None = after
        while len(times) < count and cursor is not None:
            cursor = self.next_after(cursor)
            if cursor is not None:
                times.append(cursor)
        return times

    def between(self, first: int, until: int, limit: int) -> list[int]:
        """Fire times ``t`` with ``first <= t <= until`` (``first`` is itself a fire time)."""
        times: list[int] = []
        cursor: int | None = first
        while cursor is not None and cursor <= until and len(times) < limit:
            times.append(cursor)
            cursor = self.next_after(cursor)
        return times

    def previous_before(self, before: int) -> int | None:
        """The last fire time strictly before ``before`` (ignoring ``end_at``), or None."""
        found: int | None
        if self.expression.kind == "rate":
            anchor = self.start_at if self.start_at is not None else self.anchor
            if before <= anchor:
                return None
            period = self.expression.period_ms
            found = anchor + ((before - anchor - 1) // period) * period
        else:
            found = _cron_previous(self.expression, _tz(self.timezone), before)
        if found is None or (self.start_at is not None and found < self.start_at):
            return None
        return found


@cache
def _tz(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def _rate_next(timing: Timing, after: int) -> int:
    anchor = timing.start_at if timing.start_at is not None else timing.anchor
    period = timing.expression.period_ms
    if after < anchor:
        return anchor
    return anchor + ((after - anchor) // period + 1) * period


def _naive_iter(expression: Expression, start: datetime, *, is_prev: bool = False) -> croniter:
    return croniter(expression.cron or "", start, second_at_beginning=expression.seconds_field,
                    is_prev=is_prev)


def _local_naive(ms: int, tz: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).astimezone(tz).replace(tzinfo=None)


def resolve_local(local: datetime, tz: ZoneInfo) -> int | None:
    """UTC ms of a naive local wall time; None if it does not exist (a spring-forward gap).

    A repeated wall time (fall back) resolves to its first occurrence (``fold=0``); callers
    that need "strictly after" then skip the second one, so it fires once.
    """
    aware = local.replace(tzinfo=tz, fold=0)
    if aware.astimezone(UTC).astimezone(tz).replace(tzinfo=None) != local:
        return None
    return int(aware.astimezone(UTC).timestamp() * 1000)


def _cron_next(expression: Expression, tz: ZoneInfo, after: int) -> int | None:
    # Iterate wall-clock (naive) times, which have no DST, and map each one to UTC: a
    # candidate that does not exist is skipped; one in a repeated hour maps to its first
    # occurrence, which is not after ``after`` once that has passed, so it fires once.
    iterator = _naive_iter(expression, _local_naive(after, tz))
    try:
        for _ in range(_MAX_STEPS):
            candidate = iterator.get_next(datetime)
            utc = resolve_local(candidate, tz)
            if utc is not None and utc > after:
                return utc
    except CroniterBadDateError:
        return None
    return None


def _cron_previous(expression: Expression, tz: ZoneInfo, before: int) -> int | None:
    # croniter works in whole seconds and get_prev is strictly before its start: start at
    # ``before`` rounded up to a second so that a fire time just before it is not missed.
    ceiling = -(-before // 1000) * 1000
    iterator = _naive_iter(expression, _local_naive(ceiling, tz), is_prev=True)
    try:
        for _ in range(_MAX_STEPS):
            candidate = iterator.get_prev(datetime)
            utc = resolve_local(candidate, tz)
            if utc is not None and utc < before:
                return utc
    except CroniterBadDateError:
        return None
    return None
