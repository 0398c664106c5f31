"""Job states and the one table of allowed transitions (see DESIGN.md)."""

from __future__ import annotations

from enum import StrEnum

from leasehold.errors import InvalidTransition


class JobState(StrEnum):
    SCHEDULED = "SCHEDULED"
    WAITING = "WAITING"
    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    #: A durable job suspended itself (``ctx.sleep``, a callback, its children): no lease,
    #: no worker, woken at ``run_at`` or sooner (see ``leasehold.durable``).
    SLEEPING = "SLEEPING"
    SUCCEEDED = "SUCCEEDED"
    DEAD = "DEAD"
    CANCELLED = "CANCELLED"
    #: Not started by its ``start_within_seconds`` / ``expires_at``: never ran.
    EXPIRED = "EXPIRED"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def live(self) -> bool:
        return self not in TERMINAL


TERMINAL = frozenset({JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED,
                      JobState.EXPIRED})

#: States a new job may start in: due now or soon, later, or behind dependencies.
INITIAL = frozenset({JobState.QUEUED, JobState.SCHEDULED, JobState.WAITING})

S = JobState
#: (from, to) -> what causes it. Self-transitions are hand-off re-drives (new epoch).
TRANSITIONS: dict[tuple[JobState, JobState], str] = {
    (S.SCHEDULED, S.QUEUED): "due",
    (S.SCHEDULED, S.CANCELLED): "cancel",
    (S.WAITING, S.QUEUED): "dependencies done",
    (S.WAITING, S.CANCELLED): "cancel",
    (S.QUEUED, S.RUNNING): "lease",
    (S.QUEUED, S.QUEUED): "hand-off overdue, re-sent",
    (S.QUEUED, S.CANCELLED): "cancel",
    (S.RUNNING, S.SUCCEEDED): "ok",
    (S.RUNNING, S.QUEUED): "retry after backoff, or lease expired",
    # A backoff longer than the SQS delay limit parks the job for the ticker.
    (S.RUNNING, S.SCHEDULED): "retry after a long backoff",
    (S.RUNNING, S.DEAD): "attempts exhausted, non-retryable, or poison pill",
    (S.RUNNING, S.CANCELLED): "cancel observed",
    # A start window passed before any lease (leasehold.flow.expiry): never ran.
    (S.SCHEDULED, S.EXPIRED): "start window passed",
    (S.WAITING, S.EXPIRED): "start window passed",
    (S.QUEUED, S.EXPIRED): "start window passed",
    # Its deadline passed while it waited for a lease (its key full, a throttle, a backlog):
    # it ends as the worker that leased it would end it (lifecycle.endings).
    (S.QUEUED, S.DEAD): "deadline passed before any lease",
    # Durable execution: the attempt ends without failing and the job waits, holding no lease.
    (S.RUNNING, S.SLEEPING): "suspended",
    (S.SLEEPING, S.RUNNING): "woken (lease)",
    (S.SLEEPING, S.QUEUED): "woken",
    (S.SLEEPING, S.CANCELLED): "cancel",
    # Manual re-runs of finished jobs (API retry, DLQ redrive): never automatic.
    (S.DEAD, S.QUEUED): "manual retry",
    (S.CANCELLED, S.QUEUED): "manual retry",
    # A reset from a step (leasehold.durable.reset): a durable job runs again from there.
    (S.SUCCEEDED, S.QUEUED): "reset from a step",
    # A workflow's retry: a step downstream of a re-run one waits for it again.
    (S.DEAD, S.WAITING): "workflow retry",
    (S.CANCELLED, S.WAITING): "workflow retry",
    (S.SUCCEEDED, S.WAITING): "workflow retry",
}


def allowed(source: JobState, target: JobState) -> bool:
    return (source, target) in TRANSITIONS


def check(source: JobState, target: JobState) -> None:
    if not allowed(source, target):
        raise InvalidTransition(
            f"a job cannot go from {source} to {target}", source=source, target=target
        )
