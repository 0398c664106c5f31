"""Expressions, zones and fire times, including DST, as pure functions of time."""

from __future__ import annotations

from datetime import datetime

import pytest

from leasehold.clock import iso, to_ms
from leasehold.errors import ValidationError
from leasehold.time.cron import Timing, parse, zone


def ms(text: str) -> int:
    return to_ms(datetime.fromisoformat(text))


def fires(expression: str, tz: str, after: str, count: int, **bounds: int) -> list[str | None]:
    timing = Timing(parse(expression), tz, **bounds)
    return [iso(t) for t in timing.upcoming(ms(after), count)]


@pytest.mark.parametrize(
    ("text", "kind", "normal"),
    [
        ("*/5 * * * *", "cron", "*/5 * * * *"),
        ("  0   9 * *  mon-fri ", "cron", "0 9 * * mon-fri"),
        ("*/2 * * * * *", "cron", "*/2 * * * * *"),
        ("@hourly", "cron", "@hourly"),
        ("@DAILY", "cron", "@daily"),
        ("@annually", "cron", "@annually"),
        ("rate(1 minute)", "rate", "rate(1 minute)"),
        ("rate(5 minutes)", "rate", "rate(5 minutes)"),
        ("rate(2 seconds)", "rate", "rate(2 seconds)"),
        ("Rate(3 Hours)", "rate", "rate(3 hours)"),
    ],
)
def test_valid_expressions_parse_to_their_normal_form(text: str, kind: str, normal: str) -> None:
    expression = parse(text)
    assert (expression.kind, expression.text) == (kind, normal)


@pytest.mark.parametrize(
    "text",
    ["", "   ", "* * * *", "* * * * * * *", "61 * * * *", "*/0 * * * *", "@reboot", "@every",
     "rate(0 minutes)", "rate(5 fortnights)", "rate(five minutes)", "rate(5)",
     "0 0 31 2 *", "x" * 300, "H * * * *"],
)
def test_invalid_expressions_are_rejected_naming_the_field(text: str) -> None:
    with pytest.raises(ValidationError) as raised:
        parse(text, "cron")
    assert raised.value.field == "cron"


@pytest.mark.parametrize("name", ["Mars/Olympus", "", "../../etc/passwd", "America/New York",
                                  "zoneinfo"])
def test_unknown_time_zones_are_rejected_naming_the_field(name: str) -> None:
    with pytest.raises(ValidationError) as raised:
        zone(name)
    assert raised.value.field == "timezone"


def test_known_time_zones_are_accepted() -> None:
    for name in ("UTC", "Europe/London", "America/New_York", "Australia/Lord_Howe"):
        assert zone(name).key == name


@pytest.mark.parametrize(
    ("expression", "tz", "after", "expected"),
    [
        # Weekdays at 09:00 in New York (EST, UTC-5), across a weekend.
        ("0 9 * * mon-fri", "America/New_York", "2026-01-02T13:00:00+00:00",
         ["2026-01-02T14:00:00.000Z", "2026-01-05T14:00:00.000Z"]),
        ("*/2 * * * * *", "UTC", "2026-01-01T00:00:00.500+00:00",
         ["2026-01-01T00:00:02.000Z", "2026-01-01T00:00:04.000Z"]),
        ("@hourly", "Europe/London", "2026-01-01T00:00:00+00:00",
         ["2026-01-01T01:00:00.000Z", "2026-01-01T02:00:00.000Z"]),
        ("@daily", "Asia/Kolkata", "2026-01-01T00:00:00+00:00",
         ["2026-01-01T18:30:00.000Z", "2026-01-02T18:30:00.000Z"]),
        # Both day fields restricted: standard cron ORs them (the 13th, or any Friday).
        ("0 0 13 * fri", "UTC", "2026-02-01T00:00:00+00:00",
         ["2026-02-06T00:00:00.000Z", "2026-02-13T00:00:00.000Z", "2026-02-20T00:00:00.000Z"]),
    ],
)
def test_cron_fire_times(expression: str, tz: str, after: str, expected: list[str]) -> None:
    assert fires(expression, tz, after, len(expected)) == expected


# -- DST ------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("expression", "tz", "after", "expected"),
    [
        # New York springs forward on 2026-03-08 at 02:00 -> 03:00: 02:30 does not exist.
        ("30 2 * * *", "America/New_York", "2026-03-07T00:00:00+00:00",
         ["2026-03-07T07:30:00.000Z", "2026-03-09T06:30:00.000Z"]),
        # ...and falls back on 2026-11-01 at 02:00 -> 01:00: 01:30 happens twice, fires once.
        ("30 1 * * *", "America/New_York", "2026-10-31T00:00:00+00:00",
         ["2026-10-31T05:30:00.000Z", "2026-11-01T05:30:00.000Z", "2026-11-02T06:30:00.000Z"]),
        # Every 30 minutes through the repeated hour: the second 01:00 and 01:30 are skipped.
        ("*/30 * * * *", "America/New_York", "2026-11-01T05:00:00+00:00",
         ["2026-11-01T05:30:00.000Z", "2026-11-01T07:00:00.000Z", "2026-11-01T07:30:00.000Z"]),
        # London springs forward on 2026-03-29 at 01:00 -> 02:00.
        ("30 1 * * *", "Europe/London", "2026-03-28T00:00:00+00:00",
         ["2026-03-28T01:30:00.000Z", "2026-03-30T00:30:00.000Z"]),
        # London falls back on 2026-10-25 at 02:00 -> 01:00: 01:30 fires once (BST).
        ("30 1 * * *", "Europe/London", "2026-10-24T12:00:00+00:00",
         ["2026-10-25T00:30:00.000Z", "2026-10-26T01:30:00.000Z"]),
        # Lord Howe (UTC+10:30, DST +11) springs forward 30 minutes on 2026-10-04:
        # 02:00 -> 02:30, so 02:00 and 02:15 do not exist; 01:45 and 02:30 are 15 minutes apart.
        ("*/15 1-2 * * *", "Australia/Lord_Howe", "2026-10-03T15:00:00+00:00",
         ["2026-10-03T15:15:00.000Z", "2026-10-03T15:30:00.000Z", "2026-10-03T15:45:00.000Z"]),
        ("15 2 * * *", "Australia/Lord_Howe", "2026-10-02T00:00:00+00:00",
         ["2026-10-02T15:45:00.000Z", "2026-10-04T15:15:00.000Z"]),
        # Lord Howe falls back 30 minutes on 2026-04-05: 02:00 -> 01:30; 01:45 fires once.
        ("45 1 * * *", "Australia/Lord_Howe", "2026-04-04T00:00:00+00:00",
         ["2026-04-04T14:45:00.000Z", "2026-04-05T15:15:00.000Z"]),
    ],
)
def test_dst_skips_missing_local_times_and_fires_repeated_ones_once(
    expression: str, tz: str, after: str, expected: list[str]
) -> None:
    assert fires(expression, tz, after, len(expected)) == expected


def test_rates_ignore_dst_and_count_from_their_anchor() -> None:
    start = ms("2026-11-01T05:00:00+00:00")
    timing = Timing(parse("rate(30 minutes)"), "America/New_York", anchor=start)
    assert [iso(t) for t in timing.upcoming(start, 4)] == [
        "2026-11-01T05:30:00.000Z", "2026-11-01T06:00:00.000Z", "2026-11-01T06:30:00.000Z",
        "2026-11-01T07:00:00.000Z"]
    assert timing.previous_before(ms("2026-11-01T06:10:00+00:00")) == ms(
        "2026-11-01T06:00:00+00:00")


def test_start_and_end_bound_the_fire_times() -> None:
    assert fires("@hourly", "UTC", "2026-01-01T00:00:00+00:00", 5,
                 start_at=ms("2026-01-01T02:00:00+00:00"),
                 end_at=ms("2026-01-01T04:00:00+00:00")) == [
        "2026-01-01T02:00:00.000Z", "2026-01-01T03:00:00.000Z", "2026-01-01T04:00:00.000Z"]
    rate = Timing(parse("rate(1 hour)"), start_at=ms("2026-01-01T02:00:00+00:00"))
    assert rate.next_after(0) == ms("2026-01-01T02:00:00+00:00")


@pytest.mark.parametrize(
    ("expression", "tz", "before", "expected"),
    [
        ("@hourly", "UTC", "2026-01-01T05:00:00+00:00", "2026-01-01T04:00:00.000Z"),
        ("@hourly", "UTC", "2026-01-01T05:00:00.001+00:00", "2026-01-01T05:00:00.000Z"),
        ("*/15 1-2 * * *", "Australia/Lord_Howe", "2026-10-03T15:45:00+00:00",
         "2026-10-03T15:30:00.000Z"),
        ("30 2 * * *", "America/New_York", "2026-03-09T06:30:00+00:00",
         "2026-03-07T07:30:00.000Z"),
    ],
)
def test_previous_fire_time(expression: str, tz: str, before: str, expected: str) -> None:
    assert iso(Timing(parse(expression), tz).previous_before(ms(before))) == expected
