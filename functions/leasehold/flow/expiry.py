"""Start windows: a job not started by ``start_within_seconds`` after its ``run_at`` (or by
``expires_at``) ends ``EXPIRED`` and never runs.

The row carries the deadline (``start_by``, :data:`~leasehold.core.flowcontrol.START_BY`), and
the lifecycle's lease refuses a job past it (the condition is in the lease's own write, so no
worker can start an expired job whatever its timing) and removes it once the job starts. The
job is then ended by whoever meets it first: the worker whose lease was refused, or the
sweeper, which finds a QUEUED job waiting at its hand-off deadline, which the store keeps no
later than ``start_by`` whatever holds the job (its queue, a full or paused key, a throttle).
Ending it is one fenced transition to EXPIRED, whose companions give back what the job holds
(its tenant slot, its unique claim).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from leasehold.clock import iso
from leasehold.core.flowcontrol import START_BY
from leasehold.core.jobs import Job
from leasehold.core.spec import MAX_DELAY_SECONDS, JobSpec
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound, ValidationError
from leasehold.flow.keys import option, seconds
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change
from leasehold.lifecycle.submission import Create, Submitted

log = logging.getLogger(__name__)
ACTOR = "expiry"
#: States a job may expire in (never after it started: the first lease removes start_by).
WAITING_STATES = (JobState.SCHEDULED, JobState.WAITING, JobState.QUEUED)


def start_by(app: Leasehold, spec: JobSpec, run_at: int) -> int | None:
    """The job's start deadline (ms): its own ``expires_at`` or ``start_within_seconds``,
    else its task's ``start_within_seconds``; None when it has none."""
    if spec.expires_at_ms is not None and spec.start_within_seconds is not None:
        raise ValidationError("expires_at", "give expires_at or start_within_seconds, "
                                            "not both")
    if spec.expires_at_ms is not None:
        if isinstance(spec.expires_at_ms, bool) or not isinstance(spec.expires_at_ms, int):
            raise ValidationError("expires_at", "must be a time")
        if spec.expires_at_ms <= run_at:
            raise ValidationError("expires_at", f"{iso(spec.expires_at_ms)} is not after the "
                                                f"job's start time {iso(run_at)}")
        return spec.expires_at_ms
    within = option(spec.start_within_seconds,
                    app.registry.get(spec.task).start_within_seconds)
    if within is None:
        return None
    within = seconds("start_within_seconds", within, low=0.001, high=MAX_DELAY_SECONDS)
    return run_at + int(within * 1000)


def intake(app: Leasehold, spec: JobSpec, job: Job, also: Sequence[Mapping[str, Any]],
           create: Create) -> Submitted:
    deadline = start_by(app, spec, job.run_at)
    if deadline is None:
        return create(job, also)
    lease_expires_at = job.lease_expires_at
    if job.state is JobState.QUEUED and lease_expires_at is not None:
        # The hand-off deadline is when the sweeper looks at a QUEUED job: no later than the
        # start window's end, so a job waiting in its queue is ended then. (The store holds
        # every later hand-off of the row to the same bound: a parking, a throttle's delay,
        # a wake-up, a re-send; this is the job the submission answers with.)
        lease_expires_at = min(lease_expires_at, deadline)
    return create(replace(job, extra={**job.extra, START_BY: deadline},
                          lease_expires_at=lease_expires_at), also)


def expire(app: Leasehold, job: Job, now: int) -> bool:
    """End ``job`` EXPIRED if its start window passed before it started; True if it did."""
    deadline = job.extra.get(START_BY)
    if deadline is None or now < int(deadline) or job.state not in WAITING_STATES:
        return False
    app.store.transition(job, Change(
        target=JobState.EXPIRED, actor=ACTOR, set={"finished_at": now},
        reason=f"not started by {iso(int(deadline))}"), now=now)
    log.info("job %s expired: not started by %s", job.job_id, iso(int(deadline)))
    return True


def refused(app: Leasehold, job: Job, now: int) -> None:
    """A worker's lease was refused on a row still QUEUED at its epoch: end it if expired."""
    try:
        expire(app, job, now)
    except (Conflict, NotFound):
        pass  # it changed meanwhile: someone else ended or leased it
    except Exception:
        log.warning("could not expire %s; the sweeper will", job.job_id, exc_info=True)


def install(app: Leasehold) -> None:
    app.intakes.append(intake)
    app.refused_leases.append(refused)
    app.sweep_hooks.append(expire)
