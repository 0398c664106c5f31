"""The sweeper: re-drives jobs whose lease expired or whose hand-off was lost.

It reads the sparse ``sweep`` index only, each entry once as it falls due (from a frontier,
:mod:`.sweep_frontier`), so its cost grows with the jobs handed off (a read each) and with
expired leases and jobs live longer than a lease, never with the size of the table. The
index holds a lower bound of when each live row may need the sweeper (``sweep_at``); a
finished row keeps its entry, which the sweeper passes without a write. It reads the rows
it finds, re-drives the really expired ones, and moves ``sweep_at`` of the others forward to
their current deadline. A long-running loop (:func:`run`) sweeps every
``interval_seconds`` while sweeps find work and backs off (doubling, up to a cap) while they
find none: an expired lease is then recovered within the cap of its expiry instead of
within the base interval.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, replace

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.core.holds import held
from leasehold.core.jobs import Job
from leasehold.core.pacing import IdlePacing
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle import deadletters, handoff, sweep_frontier
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.endings import bury, end_past_deadline, error_sets, retry_change
from leasehold.lifecycle.store import Change, sweep_bound

log = logging.getLogger(__name__)
ACTOR = "sweeper"
#: While passes find nothing, :func:`run` runs the repair passes at most this often (a pass
#: that found work runs them too). Idle, they are 12 queries: every 2 minutes costs 0.1
#: requests/s (issue 32); a leak a killed process left is repaired within that.
REPAIR_SECONDS = 120.0
#: How many times a pass reads again a row that changed under its write before it leaves
#: the entry to the next pass.
SETTLE_TRIES = 3
#: The epoch in which the sweeper last re-sent a QUEUED job's message.
RESENT_EPOCH = "resent_epoch"


@dataclass
class SweepReport:
    examined: int = 0
    redispatched: int = 0   # QUEUED, hand-off lost: sent again
    waiting: int = 0        # QUEUED, hand-off overdue but its queue has a backlog: not re-sent
    recovered: int = 0      # RUNNING, worker lost: queued again (a crash recovery)
    dead: int = 0           # poison pills and exhausted attempts
    cancelled: int = 0
    skipped: int = 0        # left to the next pass: changed under us each time, or about to expire
    passed: int = 0         # no longer live: its entry stays in the index, passed without a write
    moved: int = 0          # still live: ``sweep_at`` moved forward to its current deadline
    ended: int = 0          # QUEUED, ended: its deadline (DEAD) or start window (EXPIRED) passed
    #: DLQ messages no DEAD job needed any more (``deadletters.tidy``).
    dead_letters_removed: int = 0
    #: What each repair pass (``Leasehold.repairs``) repaired.
    repaired: dict[str, int] = field(default_factory=dict)
    job_ids: list[str] = field(default_factory=list)


def sweep(app: Leasehold, *, limit_per_shard: int = 500, repair: bool = True) -> SweepReport:
    """One pass; ``repair``: run the features' repair passes too (:func:`run` runs them at
    most every :data:`REPAIR_SECONDS` while passes find nothing)."""
    with app.batch():  # the pass's job state events go out together when it ends
        return _sweep(app, limit_per_shard, repair)


def _sweep(app: Leasehold, limit_per_shard: int, repair: bool = True) -> SweepReport:
    now = app.now()
    # A lease counts as expired only past the skew grace, so a worker whose clock runs a few
    # seconds behind ours never loses a lease it still believes it holds.
    cutoff = now - int(app.settings.skew_grace_seconds * 1000)
    report = SweepReport()
    backlog = _Backlog(app)
    frontier = sweep_frontier.current(app)
    advanced: dict[int, int] = {}
    for shard in range(app.settings.shards):
        start = frontier.get(shard, 0)
        reached = _sweep_shard(app, shard, start, now, cutoff, limit_per_shard, report,
                               backlog)
        if reached > start:
            advanced[shard] = reached
    try:
        sweep_frontier.save(app, advanced)
    except (ClientError, BotoCoreError):
        # Nothing is lost: the next pass reads the entries this one settled again.
        log.warning("could not save the sweep frontier", exc_info=True)
    # The features' own repairs (workflows that made no progress for a while, ...): each
    # redoes what a process that died between two writes left undone, idempotently.
    for name, repair_pass in (app.repairs.items() if repair else ()):
        report.repaired[name] = repair_pass(app, now)
    # The DLQs keep one copy per DEAD job: what a retry, a redrive or a second death left.
    report.dead_letters_removed = deadletters.tidy_due(app, now)
    return report


def _sweep_shard(app: Leasehold, shard: int, start: int, now: int, cutoff: int, limit: int,
                 report: SweepReport, backlog: _Backlog) -> int:
    """Settle the shard's entries from its frontier ``start`` up to ``cutoff`` (about
    ``limit`` of them, never splitting one ``sweep_at``); returns the new frontier: the
    first entry not settled, or ``cutoff``."""
    entries: list[tuple[int, str]] = []
    reached = cutoff
    if start >= cutoff:
        return start  # nothing fell due since the last pass (the clock did not move)
    for entry in app.store.sweep_entries(shard, start, cutoff, page=min(limit, 1000)):
        if len(entries) >= limit and entry[0] != entries[-1][0]:
            reached = entry[0]  # the rest is the next pass's
            break
        entries.append(entry)
    if not entries:
        # Nothing to settle: keeping the old frontier costs the next query nothing, and an
        # idle pass then writes nothing.
        return start
    rows = {job.job_id: job for job in app.store.batch_get([i for _, i in entries])}
    for sweep_at, job_id in entries:
        report.examined += 1
        if not _settle(app, rows.get(job_id), now, cutoff, report, backlog):
            reached = min(reached, sweep_at)
    return reached


def _settle(app: Leasehold, job: Job | None, now: int, cutoff: int, report: SweepReport,
            backlog: _Backlog) -> bool:
    """Do what an entry's row needs; True once the sweeper is done with the entry, False
    to look at it again next pass (its row kept changing under this pass, or it is about to
    need the sweeper)."""
    for _ in range(SETTLE_TRIES):
        if job is None:
            return True  # deleted
        try:
            done = _examine(app, job, now, cutoff, report, backlog)
        except NotFound:
            return True
        except Conflict:
            done = None
        except (ClientError, BotoCoreError):
            # Throttled or failed past the retries: the next pass tries the entry again.
            log.warning("could not sweep %s; the next pass tries again", job.job_id,
                        exc_info=True)
            break
        if done is not None:
            return done
        # The row changed between the read and the write (a lease, a heartbeat, a finish):
        # read it again, so that a job leased under the pass is moved to its lease, not left
        # below the frontier.
        try:
            job = app.store.get(job.job_id)
        except NotFound:
            return True
    report.skipped += 1
    return False


def found_work(report: SweepReport) -> bool:
    return bool(report.examined or any(report.repaired.values()))


def run(app: Leasehold, stop: threading.Event, *, interval_seconds: float = 2.0,
        idle_interval_seconds: float | None = None,
        wake: threading.Event | None = None) -> None:
    """Sweep until ``stop`` is set (local runtime, ECS).

    With ``idle_interval_seconds`` a sweep that finds nothing doubles the wait before the
    next, up to that. ``wake`` (set, e.g., when an API accepts a write) brings the loop back
    to its base pace at once: the next sweep comes at most ``interval_seconds`` after the
    last. The caller sets it on stop too, as the loop sleeps on it.
    """
    pace = IdlePacing(interval_seconds, idle_interval_seconds or interval_seconds)
    alarm = wake if wake is not None else stop
    repaired_at, found = -REPAIR_SECONDS, True
    while not stop.is_set():
        last = time.monotonic()
        # The repairs look for what a process killed between two writes left (a workflow
        # with no progress for 2 minutes, the children of a parent that ended): while the
        # passes find nothing they run once a minute, as the stack's sweeper does.
        repair = found or last - repaired_at >= REPAIR_SECONDS
        try:
            if repair:
                repaired_at = last
            found = found_work(sweep(app, repair=repair))
        except Exception:
            log.exception("sweeper failed; trying again")
            found = True
        deadline = time.monotonic() + pace.after(found)
        while not stop.is_set():
            if not alarm.wait(max(0.0, deadline - time.monotonic())):
                break
            if wake is not None and wake.is_set():
                wake.clear()
                pace.wake()
                deadline = min(deadline, last + interval_seconds)


class _Backlog:
    """Whether a queue has messages waiting, asked once per queue per sweep."""

    def __init__(self, app: Leasehold) -> None:
        self._app = app
        self._seen: dict[tuple[str, str], bool] = {}

    def waiting(self, pool: str, priority: str) -> bool:
        key = (pool, priority)
        if key not in self._seen:
            self._seen[key] = self._app.queues.visible(pool, priority) > 0
        return self._seen[key]


def _examine(app: Leasehold, job: Job, now: int, cutoff: int, report: SweepReport,
             backlog: _Backlog) -> bool | None:
    """True: done with the row; False: look again next pass; None: the row changed under
    the write (the caller reads it again)."""
    if job.state not in (JobState.QUEUED, JobState.RUNNING, JobState.SLEEPING) or \
            job.lease_expires_at is None:
        report.passed += 1  # finished (or waiting elsewhere): its entry stays, passed
        return True
    if job.lease_expires_at >= cutoff:
        # Live, only past its lower bound: move the bound to the row's current deadline (a
        # RUNNING job's lease; a QUEUED job's hand-off deadline, or the earliest expiry of a
        # lease it may get from now on).
        to = job.lease_expires_at if job.state is JobState.RUNNING else \
            sweep_bound(max(now, job.run_at) if job.state is JobState.SLEEPING else now,
                        job.lease_expires_at, app.settings)
        if to < now:
            # Due within the skew grace: the next pass re-drives it (a move this close to
            # the frontier could reach the index after a pass went past it).
            report.skipped += 1
            return False
        if not app.store.move_sweep(job, to):
            return None
        report.moved += 1
        return True
    if job.state is JobState.QUEUED and (
            end_past_deadline(app, job, now, ACTOR)
            or any(hook(app, job, now) for hook in app.sweep_hooks)):
        report.ended += 1  # its deadline, or a feature's window (a start window), passed
    elif job.state in (JobState.QUEUED, JobState.SLEEPING):  # a sleep's wake-up was lost too
        _redispatch(app, job, now, cutoff, report, backlog)
    else:
        _recover_running(app, job, now, cutoff, report)
    report.job_ids.append(job.job_id)
    return True


def _redispatch(app: Leasehold, job: Job, now: int, cutoff: int, report: SweepReport,
                backlog: _Backlog) -> None:
    """A QUEUED job past its hand-off deadline: its message was lost, or is still waiting.

    The message is sent again with the same epoch (a duplicate is fenced: only one lease can
    win), once per epoch; after that only while the queue is empty, i.e. when the message
    cannot be waiting behind a backlog. Either way the deadline moves a full period on, so
    under a long backlog a job is looked at once per ``handoff_seconds`` and its message
    exists at most twice.
    """
    # A held job (paused) is not sent: the lease would refuse it. Its deadline moves on,
    # so a start window is still met (the sweep hooks end it), and lifting the hold sends it.
    resend = not held(job.extra) and (job.extra.get(RESENT_EPOCH) != job.epoch or
                                      not backlog.waiting(job.pool, job.priority))
    change = Change(
        target=JobState.QUEUED, actor=ACTOR, expired_before=cutoff,
        reason="hand-off overdue, re-sent" if resend else
        "hand-off overdue, held" if held(job.extra) else "hand-off overdue, still queued",
        set={"lease_expires_at": handoff.handoff_deadline(now, app.settings),
             RESENT_EPOCH: job.epoch},
    )
    new = app.store.transition(job, change, now=now)
    if resend:
        handoff.send(app.queues, new, now)
        report.redispatched += 1
    else:
        report.waiting += 1


def recover(app: Leasehold, job: Job, now: int) -> None:
    """Re-drive a RUNNING job whose lease ran out (past the skew grace), as a pass does: a
    worker that meets its message again calls it (SQS is the sweeper of a job without a
    ``sweep`` entry). Raises :class:`Conflict` if the row changed (a heartbeat landed)."""
    _recover_running(app, job, now, now - int(app.settings.skew_grace_seconds * 1000),
                     SweepReport())


def _recover_running(app: Leasehold, job: Job, now: int, cutoff: int,
                     report: SweepReport) -> None:
    crashes = job.crash_count + 1
    message = f"lease expired on attempt {job.attempt}: the worker was lost"
    error_item = {"type": "LeaseExpired", "message": message, "traceback": "",
                  "types": ["LeaseExpired"]}
    # Every change here is conditioned on the lease still being expired, so a heartbeat that
    # lands after our read wins; and retries or burials refuse a job whose cancel was
    # requested meanwhile (the next sweep honours the cancel).
    if job.cancel_requested:
        app.store.transition(job, Change(target=JobState.CANCELLED, actor=ACTOR,
                                         reason="cancel requested; worker lost",
                                         expired_before=cutoff,
                                         set={"finished_at": now}), now=now)
        report.cancelled += 1
        return
    reason = None
    if crashes >= app.settings.max_crash_recoveries:
        reason = f"poison pill: its worker was lost {crashes} times"
    elif job.attempt >= job.max_attempts:
        reason = f"attempts exhausted ({job.attempt}/{job.max_attempts}); last worker lost"
    if reason is not None:
        dead = app.store.transition(
            job, Change(target=JobState.DEAD, actor=ACTOR, reason=reason,
                        increment={"crash_count": 1}, expired_before=cutoff,
                        unless_cancel_requested=True,
                        set={**error_sets(job, error_item), "finished_at": now}), now=now)
        bury(app, dead, reason)
        report.dead += 1
        return
    new = app.store.transition(
        job, replace(retry_change(app, job, now, now, ACTOR, owner=None, error_item=error_item,
                                  reason="lease expired (crash recovery)",
                                  increment={"crash_count": 1}), expired_before=cutoff),
        now=now)
    handoff.send(app.queues, new, now)
    report.recovered += 1
