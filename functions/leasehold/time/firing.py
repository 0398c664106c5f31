"""What one tick does with one schedule: misfire and overlap decisions (pure; takes ``now``).

Occurrences are sorted into three groups by the tick that sees them:

- **missed**: older than the starting deadline (the ticker was down, or paused too long);
  the misfire policy decides: ``skip`` drops them, ``fire_once`` runs the latest of them once
  (coalesced; not at all if an on-time occurrence runs in the same tick), ``catch_up`` runs
  the ``max_catch_up`` most recent ones, each as its own job (Quartz's misfire instructions,
  Kubernetes CronJob's ``startingDeadlineSeconds``).
- **late**: due, but within the deadline (a tick that came late): they run now.
- **ahead**: due before the next tick: they are created now and handed off with
  ``DelaySeconds``, so they start on time although the ticker runs once a minute.

Overlap: ``allow`` fires everything. ``forbid`` and ``replace`` never run two occurrences at
once, so they fire at most one per tick (a catch-up collapses to its latest run). If the
previous run is still live, an occurrence that is already due is skipped (``forbid``) or
replaces it (``replace``); one that is not due yet waits for a later tick, because the
previous run may still finish before it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import StrEnum

from leasehold.time.cron import Timing

#: Occurrences one tick handles per schedule; a longer backlog continues at the next tick.
MAX_PER_TICK = 100
#: Missed occurrences counted one by one before the count is only estimated.
_COUNT_LIMIT = 10_000


class MisfirePolicy(StrEnum):
    SKIP = "skip"
    FIRE_ONCE = "fire_once"
    CATCH_UP = "catch_up"


class OverlapPolicy(StrEnum):
    ALLOW = "allow"
    FORBID = "forbid"
    REPLACE = "replace"


@dataclass(frozen=True, kw_only=True)
class Rules:
    """Everything about a schedule that firing decisions depend on."""

    schedule_id: str
    timing: Timing
    misfire: MisfirePolicy = MisfirePolicy.FIRE_ONCE
    overlap: OverlapPolicy = OverlapPolicy.ALLOW
    starting_deadline_ms: int = 300_000
    max_catch_up: int = 10
    max_runs: int | None = None
    jitter_ms: int = 0


@dataclass(frozen=True)
class Occurrence:
    #: The nominal fire time: the job's ``scheduled_for`` and part of its id.
    fire_at: int
    #: When the job should start: the fire time plus jitter, never before ``now``.
    run_at: int


@dataclass(frozen=True)
class Plan:
    fire: tuple[Occurrence, ...] = ()
    #: Occurrences dropped by the misfire or overlap policy.
    skipped: int = 0
    #: Cancel the previous run first (overlap ``replace``).
    cancel_previous: bool = False
    #: The new cursor: the earliest occurrence not handled yet; None when the schedule is done.
    next_fire_at: int | None = None
    #: Nothing to write: the cursor stays where it is.
    unchanged: bool = False


def jitter(schedule_id: str, fire_at: int, jitter_ms: int) -> int:
    """A stable delay in ``[0, jitter_ms]``: every tick computes the same one for an occurrence."""
    if jitter_ms <= 0:
        return 0
    digest = hashlib.blake2b(f"{schedule_id}:{fire_at}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % (jitter_ms + 1)


def occurrence(rules: Rules, fire_at: int, now: int) -> Occurrence:
    return Occurrence(fire_at, max(now, fire_at + jitter(rules.schedule_id, fire_at,
                                                         rules.jitter_ms)))


def plan(rules: Rules, *, next_fire_at: int | None, run_count: int, now: int,
         lookahead_ms: int, previous_live: bool) -> Plan:
    """Decide what a tick at ``now`` fires for a schedule whose cursor is ``next_fire_at``."""
    if next_fire_at is None:
        return Plan(unchanged=True)
    if rules.max_runs is not None and run_count >= rules.max_runs:
        return Plan(next_fire_at=None)
    horizon = now + lookahead_ms
    if next_fire_at > horizon:
        return Plan(unchanged=True)
    deadline = now - rules.starting_deadline_ms

    missed_tail, missed_count, first_ok = _missed(rules, next_fire_at, deadline)
    on_time = rules.timing.between(first_ok, horizon, MAX_PER_TICK) if first_ok is not None \
        else []
    late = [t for t in on_time if t <= now]
    ahead = [t for t in on_time if t > now]
    # Where the cursor goes if every occurrence seen here is handled.
    after_seen = rules.timing.next_after(on_time[-1]) if on_time else first_ok

    chosen, skipped = _apply_misfire(rules.misfire, missed_tail, missed_count, rules.max_catch_up,
                                     bool(late))
    past = chosen + late
    if rules.overlap is OverlapPolicy.ALLOW:
        fire, cursor, cancel = past + ahead, after_seen, False
    elif past:
        skipped += len(past) - 1
        latest = past[-1]
        # Ahead occurrences are left for a later tick: the one fired now must finish first.
        cursor = ahead[0] if ahead else (rules.timing.next_after(now) if after_seen is not None
                                         else None)
        if previous_live and rules.overlap is OverlapPolicy.FORBID:
            fire, cancel, skipped = [], False, skipped + 1
        else:
            fire, cancel = [latest], previous_live
    elif ahead and not previous_live:
        fire, cancel = [ahead[0]], False
        cursor = ahead[1] if len(ahead) > 1 else rules.timing.next_after(ahead[0])
    else:
        # Not due yet and the previous run is live: decide when it is due.
        return Plan(unchanged=True) if not skipped else Plan(
            skipped=skipped, next_fire_at=ahead[0] if ahead else after_seen)

    if rules.max_runs is not None:
        room = rules.max_runs - run_count
        if len(fire) >= room:
            fire, cursor = fire[:room], None
    return Plan(fire=tuple(occurrence(rules, t, now) for t in fire), skipped=skipped,
                cancel_previous=cancel and bool(fire), next_fire_at=cursor)


def _missed(rules: Rules, cursor: int, deadline: int) -> tuple[list[int], int, int | None]:
    """(the most recent missed occurrences, how many were missed, the first one not missed)."""
    if cursor >= deadline:
        return [], 0, cursor
    # The first occurrence inside the deadline; the missed ones are the ones before it.
    first_ok = rules.timing.next_after(deadline - 1)
    keep = max(1, rules.max_catch_up)
    tail: list[int] = []
    probe = first_ok if first_ok is not None else deadline
    while len(tail) < keep:
        found = rules.timing.previous_before(probe)
        if found is None or found < cursor:
            break
        tail.append(found)
        probe = found
    tail.reverse()
    return tail, _count(rules.timing, cursor, deadline, len(tail)), first_ok


def _count(timing: Timing, cursor: int, deadline: int, at_least: int) -> int:
    period = timing.expression.period_ms
    if period:
        return max(at_least, (deadline - 1 - cursor) // period + 1)
    return max(at_least, len(timing.between(cursor, deadline - 1, _COUNT_LIMIT)))


def _apply_misfire(policy: MisfirePolicy, tail: list[int], count: int, max_catch_up: int,
                   on_time_runs: bool) -> tuple[list[int], int]:
    """(missed occurrences to run, missed occurrences dropped)."""
    if not tail:
        return [], 0
    if policy is MisfirePolicy.CATCH_UP and max_catch_up > 0:
        chosen = tail[-max_catch_up:]
        return chosen, count - len(chosen)
    if policy is MisfirePolicy.FIRE_ONCE and not on_time_runs:
        return [tail[-1]], count - 1
    return [], count


@dataclass(frozen=True)
class TickOutcome:
    """What a tick did with one schedule (for reports and tests)."""

    schedule_id: str
    fired: list[str] = field(default_factory=list)
    skipped: int = 0
    cancelled: list[str] = field(default_factory=list)
