"""Misfire and overlap decisions, table-driven over an injected ``now``."""

from __future__ import annotations

import pytest

from leasehold.time.cron import Timing, parse
from leasehold.time.firing import MAX_PER_TICK, MisfirePolicy, OverlapPolicy, Rules, jitter, plan

M = 60_000
H = 60 * M
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a whole hour
LOOKAHEAD = 90_000


def rules(expression: str = "* * * * *", **overrides: object) -> Rules:
    values: dict[str, object] = {"schedule_id": "s1", "timing": Timing(parse(expression))}
    values.update(overrides)
    return Rules(**values)  # type: ignore[arg-type]


def fired(result_plan: object) -> list[int]:
    return [o.fire_at for o in result_plan.fire]  # type: ignore[attr-defined]


def test_an_on_time_tick_fires_what_falls_due_before_the_next_tick() -> None:
    # Tick at 00:00:30 with a 90 s lookahead: 00:01 and 00:02 are created ahead of time.
    result = plan(rules(), next_fire_at=T0 + M, run_count=0, now=T0 + 30_000,
                  lookahead_ms=LOOKAHEAD, previous_live=False)
    assert fired(result) == [T0 + M, T0 + 2 * M]
    assert [o.run_at for o in result.fire] == [T0 + M, T0 + 2 * M]  # their own time: delayed
    assert result.next_fire_at == T0 + 3 * M and result.skipped == 0


def test_a_second_tick_with_the_advanced_cursor_fires_nothing_again() -> None:
    first = plan(rules(), next_fire_at=T0 + M, run_count=0, now=T0 + 30_000,
                 lookahead_ms=LOOKAHEAD, previous_live=False)
    again = plan(rules(), next_fire_at=first.next_fire_at, run_count=2, now=T0 + 31_000,
                 lookahead_ms=LOOKAHEAD, previous_live=False)
    assert again.fire == () and again.unchanged


def test_a_concurrent_tick_on_the_same_cursor_plans_the_same_occurrences() -> None:
    # Both ticks derive the same job ids from these, so the conditional put creates each once.
    a = plan(rules(), next_fire_at=T0 + M, run_count=0, now=T0 + 30_000,
             lookahead_ms=LOOKAHEAD, previous_live=False)
    b = plan(rules(), next_fire_at=T0 + M, run_count=0, now=T0 + 30_500,
             lookahead_ms=LOOKAHEAD, previous_live=False)
    assert fired(a) == fired(b)


@pytest.mark.parametrize("policy", list(MisfirePolicy))
def test_a_tick_90_seconds_late_still_fires_every_occurrence_once_under_every_policy(
    policy: MisfirePolicy,
) -> None:
    # Hourly; the tick meant for 00:59:30 arrives at 01:01:00, 60 s after the 01:00 run.
    result = plan(rules("@hourly", misfire=policy), next_fire_at=T0 + H, run_count=0,
                  now=T0 + H + M, lookahead_ms=LOOKAHEAD, previous_live=False)
    assert fired(result) == [T0 + H]
    assert result.fire[0].run_at == T0 + H + M  # late: runs now
    assert result.next_fire_at == T0 + 2 * H and result.skipped == 0


@pytest.mark.parametrize(
    ("policy", "max_catch_up", "expected_fired", "expected_skipped"),
    [
        # Every 15 minutes; the ticker was down from 00:00 to 02:00 (8 occurrences missed:
        # 00:00 ... 01:45 are older than the 5-minute deadline; 02:00 is on time).
        (MisfirePolicy.SKIP, 10, [2 * H], 8),
        # fire_once coalesces the missed runs into the run that happens now anyway.
        (MisfirePolicy.FIRE_ONCE, 10, [2 * H], 8),
        (MisfirePolicy.CATCH_UP, 3, [H + 15 * M, H + 30 * M, H + 45 * M, 2 * H], 5),
        (MisfirePolicy.CATCH_UP, 10, [i * 15 * M for i in range(9)], 0),
    ],
)
def test_a_two_hour_outage_follows_the_misfire_policy(
    policy: MisfirePolicy, max_catch_up: int, expected_fired: list[int], expected_skipped: int,
) -> None:
    result = plan(rules("*/15 * * * *", misfire=policy, max_catch_up=max_catch_up),
                  next_fire_at=T0, run_count=0, now=T0 + 2 * H, lookahead_ms=LOOKAHEAD,
                  previous_live=False)
    assert fired(result) == [T0 + t for t in expected_fired]
    assert result.skipped == expected_skipped
    assert result.next_fire_at == T0 + 2 * H + 15 * M
    assert all(o.run_at == max(T0 + 2 * H, o.fire_at) for o in result.fire)


@pytest.mark.parametrize(
    ("policy", "expected_fired", "expected_skipped"),
    [
        (MisfirePolicy.SKIP, [], 2),
        (MisfirePolicy.FIRE_ONCE, [H], 1),  # the latest missed run, once, now
        (MisfirePolicy.CATCH_UP, [0, H], 0),
    ],
)
def test_an_outage_between_hourly_runs_follows_the_misfire_policy(
    policy: MisfirePolicy, expected_fired: list[int], expected_skipped: int,
) -> None:
    # Down from 00:00 to 01:30: 00:00 and 01:00 were missed; 02:00 is 30 minutes away.
    result = plan(rules("@hourly", misfire=policy), next_fire_at=T0, run_count=0,
                  now=T0 + H + 30 * M, lookahead_ms=LOOKAHEAD, previous_live=False)
    assert fired(result) == [T0 + t for t in expected_fired]
    assert result.skipped == expected_skipped
    assert result.next_fire_at == T0 + 2 * H


def test_the_starting_deadline_decides_what_counts_as_missed() -> None:
    late = dict(next_fire_at=T0, run_count=0, now=T0 + 10 * M, lookahead_ms=LOOKAHEAD,
                previous_live=False)
    strict = plan(rules("@hourly", misfire=MisfirePolicy.SKIP, starting_deadline_ms=5 * M),
                  **late)  # type: ignore[arg-type]
    lenient = plan(rules("@hourly", misfire=MisfirePolicy.SKIP, starting_deadline_ms=15 * M),
                   **late)  # type: ignore[arg-type]
    assert (fired(strict), strict.skipped) == ([], 1)
    assert (fired(lenient), lenient.skipped) == ([T0], 0)


def test_a_long_per_second_backlog_is_worked_off_in_bounded_steps() -> None:
    now = T0 + 2 * H
    result = plan(rules("* * * * * *", misfire=MisfirePolicy.CATCH_UP, max_catch_up=2),
                  next_fire_at=T0, run_count=0, now=now, lookahead_ms=1_000,
                  previous_live=False)
    # 6,900 missed (older than 300 s): the 2 most recent are caught up, the rest dropped;
    # then the on-time backlog, at most MAX_PER_TICK per tick; the cursor resumes after it.
    assert fired(result)[:3] == [now - 302_000, now - 301_000, now - 300_000]
    assert len(result.fire) == 2 + MAX_PER_TICK
    assert result.skipped == 6_898
    assert result.next_fire_at == now - 300_000 + MAX_PER_TICK * 1_000


# -- overlap -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("overlap", "live", "expected_fired", "cancel", "skipped", "cursor"),
    [
        (OverlapPolicy.ALLOW, True, [H], False, 0, 2 * H),
        (OverlapPolicy.FORBID, False, [H], False, 0, 2 * H),
        (OverlapPolicy.FORBID, True, [], False, 1, 2 * H),
        (OverlapPolicy.REPLACE, False, [H], False, 0, 2 * H),
        (OverlapPolicy.REPLACE, True, [H], True, 0, 2 * H),
    ],
)
def test_a_due_occurrence_follows_the_overlap_policy(
    overlap: OverlapPolicy, live: bool, expected_fired: list[int], cancel: bool, skipped: int,
    cursor: int,
) -> None:
    result = plan(rules("@hourly", overlap=overlap), next_fire_at=T0 + H, run_count=0,
                  now=T0 + H + 1_000, lookahead_ms=LOOKAHEAD, previous_live=live)
    assert fired(result) == [T0 + t for t in expected_fired]
    assert (result.cancel_previous, result.skipped, result.next_fire_at) == (
        cancel, skipped, T0 + cursor)


@pytest.mark.parametrize("overlap", [OverlapPolicy.FORBID, OverlapPolicy.REPLACE])
def test_an_occurrence_not_due_yet_waits_while_the_previous_run_is_live(
    overlap: OverlapPolicy,
) -> None:
    waiting = plan(rules("@hourly", overlap=overlap), next_fire_at=T0 + H, run_count=0,
                   now=T0 + H - 30_000, lookahead_ms=LOOKAHEAD, previous_live=True)
    assert waiting.unchanged and waiting.fire == ()
    # With the previous run finished it is created ahead of time like any other.
    ready = plan(rules("@hourly", overlap=overlap), next_fire_at=T0 + H, run_count=0,
                 now=T0 + H - 30_000, lookahead_ms=LOOKAHEAD, previous_live=False)
    assert fired(ready) == [T0 + H] and ready.fire[0].run_at == T0 + H


@pytest.mark.parametrize("overlap", [OverlapPolicy.FORBID, OverlapPolicy.REPLACE])
def test_forbid_and_replace_fire_one_occurrence_per_tick(overlap: OverlapPolicy) -> None:
    # Every 30 s, tick with 90 s lookahead: allow would create three, these create one.
    result = plan(rules("*/30 * * * * *", overlap=overlap), next_fire_at=T0 + 30_000,
                  run_count=0, now=T0 + 1_000, lookahead_ms=LOOKAHEAD, previous_live=False)
    assert fired(result) == [T0 + 30_000]
    assert result.next_fire_at == T0 + 60_000


def test_catch_up_under_forbid_collapses_to_the_latest_missed_run() -> None:
    result = plan(rules("@hourly", misfire=MisfirePolicy.CATCH_UP, overlap=OverlapPolicy.FORBID),
                  next_fire_at=T0, run_count=0, now=T0 + 3 * H + 30 * M,
                  lookahead_ms=LOOKAHEAD, previous_live=False)
    assert fired(result) == [T0 + 3 * H]
    assert result.skipped == 3 and result.next_fire_at == T0 + 4 * H


# -- bounds and jitter ---------------------------------------------------------------------

def test_max_runs_stops_the_schedule() -> None:
    result = plan(rules(max_runs=3), next_fire_at=T0 + M, run_count=2, now=T0 + 30_000,
                  lookahead_ms=LOOKAHEAD, previous_live=False)
    assert fired(result) == [T0 + M] and result.next_fire_at is None
    done = plan(rules(max_runs=3), next_fire_at=T0 + 2 * M, run_count=3, now=T0 + 90_000,
                lookahead_ms=LOOKAHEAD, previous_live=False)
    assert done.fire == () and done.next_fire_at is None and not done.unchanged


def test_end_at_stops_the_schedule() -> None:
    timing = Timing(parse("* * * * *"), end_at=T0 + M)
    result = plan(Rules(schedule_id="s1", timing=timing), next_fire_at=T0 + M, run_count=0,
                  now=T0 + 30_000, lookahead_ms=LOOKAHEAD, previous_live=False)
    assert fired(result) == [T0 + M] and result.next_fire_at is None


def test_jitter_is_stable_and_bounded() -> None:
    values = [jitter("s1", T0 + i * M, 10_000) for i in range(200)]
    assert all(0 <= v <= 10_000 for v in values)
    assert len(set(values)) > 100  # spread out
    assert values == [jitter("s1", T0 + i * M, 10_000) for i in range(200)]
    result = plan(rules(jitter_ms=10_000), next_fire_at=T0 + M, run_count=0, now=T0 + 30_000,
                  lookahead_ms=LOOKAHEAD, previous_live=False)
    assert [o.run_at - o.fire_at for o in result.fire] == [
        jitter("s1", T0 + M, 10_000), jitter("s1", T0 + 2 * M, 10_000)]
