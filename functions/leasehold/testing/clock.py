"""The test clock of the in-process scheduler: time moves when the test moves it.

``clock.advance(seconds)`` (the ``clock`` fixture, ``leasehold.advance``) walks the clock
from one *timer* to the next, up to its target, and at each one does what the deployed
scheduler would do at that time: the ticker's pass, the sweeper's pass, and the jobs that
are ready. So what falls due in the interval happens, once, in time order. The timers are
where the scheduler keeps work for later, read from the runtime's own tables and queues:

- a hand-off message held by SQS (a delay or a back-off within 15 minutes, a short
  ``ctx.sleep``, a callback's timeout, a throttle's delay, a debounce window): moto's SQS
  reads this clock (:func:`leasehold.local.sqs_time.follow`) and releases each message at its
  job's ``run_at``;
- the ``due`` index (longer delays and sleeps) and each schedule's next fire time: the
  ticker hands the job off, or fires the run, at its time (it looks no further ahead than
  the clock: on AWS it works 90 s ahead, so that its once-a-minute ticks are never late);
- the ``sweep`` index: the sweeper ends a job whose start window passed, re-sends a lost
  hand-off and takes over an expired lease.

Between advances the clock stands still; a wait of the runtime's own on it (a worker
waiting for a lease to end, say) moves it, as :class:`~leasehold.clock.FakeClock` does.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from leasehold.aws.definitions import DUE_INDEX
from leasehold.clock import FakeClock, to_datetime
from leasehold.core.states import JobState
from leasehold.lifecycle import sweep_frontier
from leasehold.lifecycle.app import Leasehold
from leasehold.local import sqs_time
from leasehold.settings import PRIORITIES

#: The most timers one ``advance`` passes; more is a timer that keeps re-arming at once.
MAX_STEPS = 100_000
#: The most rows of the sweep index the clock reads to find the sweeper's next time.
MAX_LIVE = 1000
_END_OF_TIME = 2**62
#: The states in which the sweeper acts on a row once its deadline has passed.
SWEPT = (JobState.QUEUED, JobState.RUNNING, JobState.SLEEPING)


class TooManyTimers(RuntimeError):
    """The clock passed ``MAX_STEPS`` timers in one advance: something re-arms at once."""


#: What is due at a timer: ``ticker`` (the due index, a schedule), ``sweeper`` (the sweep
#: index), ``queues`` (a message's delay or visibility timeout ends).
Parts = frozenset[str]
EVERYTHING: Parts = frozenset({"ticker", "sweeper", "queues"})


class TestClock(FakeClock):
    """The scheduler's clock in a test. It starts at the wall clock's current second (so
    times an application computes from ``datetime.now()`` fall near it) and then moves only
    when the test moves it."""

    __test__ = False  # not a test class, whatever pytest's name rules say

    def __init__(self) -> None:
        super().__init__(time.time_ns() // 1_000_000_000 * 1000)
        self._settle: Callable[[Parts], Any] | None = None
        self._next: Callable[[int], tuple[int, Parts] | None] | None = None

    def bind(self, settle: Callable[[Parts], Any],
             next_timer: Callable[[int], tuple[int, Parts] | None]) -> None:
        """What a step does (``settle(parts)``) and where the next timer is
        (``next_timer(now)``: its time and what is due then)."""
        self._settle, self._next = settle, next_timer

    def now(self) -> datetime:
        """The scheduler's time, as an aware UTC datetime."""
        return to_datetime(self.now_ms())

    def advance(self, seconds: float) -> int:
        """Move ``seconds`` ahead, doing at each timer on the way what falls due then, in
        time order. Returns the new time (epoch ms)."""
        if seconds < 0:
            raise ValueError("the test clock never goes back")
        settle, next_timer = self._bound()
        target = self.now_ms() + round(seconds * 1000)
        settle(EVERYTHING)  # what is due already (a test may advance 0 to run it)
        for _ in range(MAX_STEPS):
            timer = next_timer(self.now_ms())
            if timer is None or timer[0] > target:
                break
            self.set(timer[0])
            settle(timer[1])
        else:
            raise TooManyTimers(f"more than {MAX_STEPS} timers in one advance")
        self.set(max(self.now_ms(), target))
        return self.now_ms()

    def skip(self) -> bool:
        """Jump to the next timer and do what falls due there; False if there is none."""
        settle, next_timer = self._bound()
        timer = next_timer(self.now_ms())
        if timer is None:
            return False
        self.set(timer[0])
        settle(timer[1])
        return True

    def _bound(self) -> tuple[Callable[[Parts], Any],
                              Callable[[int], tuple[int, Parts] | None]]:
        if self._settle is None or self._next is None:
            raise RuntimeError("this test clock drives no scheduler yet")
        return self._settle, self._next

    def sleep(self, seconds: float) -> None:
        """A wait of the runtime's own: the time passes at once (nothing else runs)."""
        FakeClock.advance(self, max(0.0, seconds))


def next_timer(app: Leasehold, now: int) -> tuple[int, Parts] | None:
    """The earliest time after ``now`` at which the ticker, the sweeper or a queue of
    ``app`` has something to do, and which of them; None if nothing waits for a time."""
    grace = int(app.settings.skew_grace_seconds * 1000)
    times: list[tuple[int, str]] = []
    settings = app.settings
    for shard in range(settings.shards):
        # The ticker hands a job off, or fires a schedule's run, at its time.
        for table, sort in ((settings.jobs_table, "run_at"),
                            (settings.schedules_table, "next_fire_at")):
            first = _first(app, table, DUE_INDEX.name, sort, shard, now)
            if first is not None:
                times.append((first, "ticker"))
        # The sweeper acts on a row once its deadline (a lease's end, a hand-off's, a start
        # window's) is past the skew grace. Before that a pass only moves the row's sweep_at
        # closer to the deadline, which changes nothing a test sees, so the clock skips
        # those passes: a job delayed an hour costs no step per lease period.
        # A finished row keeps its entry (below or above the sweeper's frontier), so only
        # the entries at or above the frontier whose rows are still live count.
        entries = app.store.sweep_entries(
            shard, sweep_frontier.current(app).get(shard, 0), _END_OF_TIME)
        live = [job_id for _, job_id in itertools.islice(entries, MAX_LIVE)]
        times += [(job.lease_expires_at + grace + 1, "sweeper")
                  for job in (app.store.batch_get(live) if live else ())
                  if job.lease_expires_at is not None and job.state in SWEPT]
    urls = [app.queues.url(pool, priority) for pool in settings.pools for priority in PRIORITIES]
    released = sqs_time.next_release(urls, region=app.clients.sqs.meta.region_name)
    if released is not None:
        times.append((released, "queues"))
    due = min((t for t, _ in times if t > now), default=None)
    if due is None:
        return None
    return due, frozenset(part for t, part in times if t == due)


def _first(app: Leasehold, table: str, index: str, sort: str, shard: int,
           after: int) -> int | None:
    """The smallest ``sort`` after ``after`` in ``shard`` of a ``due`` index."""
    items = app.clients.dynamodb.query(
        TableName=table, IndexName=index, Limit=1,
        KeyConditionExpression="due_shard = :s AND #t > :a",
        ExpressionAttributeNames={"#t": sort},
        ExpressionAttributeValues={":s": {"N": str(shard)}, ":a": {"N": str(after)}},
    )["Items"]
    return int(items[0][sort]["N"]) if items else None
