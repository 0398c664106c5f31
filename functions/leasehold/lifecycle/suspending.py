"""Putting a job to sleep when its handler suspends itself (durable execution).

The lifecycle knows only :class:`~leasehold.core.suspension.Sleep`: until when, for what, and
which conditions must hold as the job goes to sleep. What steps, callbacks and children are
lives in :mod:`leasehold.durable`, which this layer never imports.

A sleep the SQS delay can hold (15 minutes) is handed off at once, as a delayed retry is: the
row is SLEEPING with a hand-off deadline (so the sweeper finds it if the message is lost) and
its message leases it straight from SLEEPING at ``run_at``. A longer one waits in the ``due``
index and the ticker wakes it (SLEEPING -> QUEUED), as it promotes a SCHEDULED job. Either way
the job holds no lease and no worker while it sleeps, and the move is fenced like a finish
(owner, epoch, no cancel requested) and bumps the epoch, so a message of the attempt that
suspended can never lease it again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from leasehold.aws.dynamo import Cancelled
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.core.suspension import Sleep
from leasehold.errors import LeaseLost
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change
from leasehold.lifecycle.submission import DEADLINE

#: On the row while it sleeps: what it waits for (``sleep``, ``callback:<name>``, ``children``).
WAITING = "waiting"


def suspend(app: Leasehold, job: Job, owner: str, sleep: Sleep, now: int, *, actor: str) -> Job:
    """RUNNING -> SLEEPING until ``sleep.wake_at``; or, when one of ``sleep.also``'s
    conditions fails (what it waits for happened meanwhile), straight back to QUEUED.

    The attempt does not count as one: ``attempt`` goes back by one, so the lease that wakes
    the job gives its handler the same attempt number and a job may sleep any number of
    times without using up ``max_attempts``.
    """
    deadline = job.extra.get(DEADLINE)
    # A job never sleeps past its deadline: it wakes then, and its worker ends it DEAD.
    wake_at = max(min(sleep.wake_at, int(deadline) if deadline is not None else sleep.wake_at),
                  now)
    sets: dict[str, object] = {"run_at": wake_at, WAITING: sleep.waiting}
    for suspension in app.suspensions:  # e.g. the span that suspended (leasehold.tracing)
        sets.update(suspension(app, job))
    short = handoff.within_sqs_delay(wake_at, now)
    if short:
        sets["lease_expires_at"] = handoff.handoff_deadline(wake_at, app.settings)
    change = Change(target=JobState.SLEEPING, actor=actor, reason=f"suspended: {sleep.waiting}",
                    owner=owner, bump_epoch=True, increment={"attempt": -1}, set=sets,
                    remove=("lease_owner",), unless_cancel_requested=True, also=sleep.also)
    try:
        new = app.store.transition(job, change, now=now, conflict=LeaseLost)
    except Cancelled:
        # The callback was completed or a child finished between the handler's look and
        # this write: sleeping now would miss its wake-up. Run again at once instead.
        resume = Change(target=JobState.QUEUED, actor=actor,
                        reason=f"{sleep.waiting}: ready before it slept", owner=owner,
                        bump_epoch=True, increment={"attempt": -1},
                        set={**{k: v for k, v in sets.items()
                                if k not in ("run_at", WAITING, "lease_expires_at")},
                             "run_at": now,
                             "lease_expires_at": handoff.handoff_deadline(now, app.settings)},
                        remove=("lease_owner",), unless_cancel_requested=True)
        new = app.store.transition(job, resume, now=now, conflict=LeaseLost)
        short = True
    if short:
        handoff.send(app.queues, new, now)
    return new


def wake(app: Leasehold, job: Job, *, actor: str, reason: str,
         also: Sequence[Mapping[str, Any]] = ()) -> Job:
    """SLEEPING -> QUEUED now (a callback completed, a child finished): fenced by (state,
    epoch) and a new epoch, so the sleep's own delayed message can no longer lease it.
    ``also``: writes committed with it (a callback's outcome)."""
    now = app.now()
    change = Change(target=JobState.QUEUED, actor=actor, reason=reason, bump_epoch=True,
                    set={"run_at": now,
                         "lease_expires_at": handoff.handoff_deadline(now, app.settings)},
                    also=also)
    new = app.store.transition(job, change, now=now)
    handoff.send(app.queues, new, now)
    return new
