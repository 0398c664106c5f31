"""What users do to existing jobs: look them up, cancel them, re-run finished ones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from leasehold.aws.dynamo import Cancelled
from leasehold.core.flowcontrol import START_BY
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change, ConditionFailed
from leasehold.lifecycle.store_base import SLOT_WAS
from leasehold.lifecycle.submission import ADMISSION_SHARD, COUNTED, DEADLINE, SLOT_AT


def get_job(app: Leasehold, job_id: str, tenant: str | None = None) -> Job:
    """The job, or NotFound; another tenant's job is NotFound too, never Forbidden."""
    job = app.store.get(job_id)
    if tenant is not None and job.tenant != tenant:
        raise NotFound(f"no job {job_id}", job_id=job_id)
    return job


def cancel(app: Leasehold, job_id: str, tenant: str | None = None, *, actor: str = "api") -> Job:
    """Cancel now if the job is not running; flag it if it is (its worker stops it)."""
    for _ in range(3):  # a lease or a tick may change the job between our read and write
        job = get_job(app, job_id, tenant)
        now = app.now()
        if job.state.terminal:
            raise Conflict(f"job {job_id} already finished ({job.state})", job_id=job_id)
        if job.state is JobState.RUNNING:
            if job.cancel_requested:
                return job
            try:
                return app.store.request_cancel(job)
            except ConditionFailed:
                continue
        try:
            return app.store.transition(
                job, Change(target=JobState.CANCELLED, actor=actor, reason="cancelled",
                            set={"finished_at": now}), now=now)
        except Conflict:
            continue
    raise Conflict(f"job {job_id} kept changing; try again", job_id=job_id)


def finished(app: Leasehold, job_id: str, tenant: str | None = None) -> Job:
    """The job, if it may be retried (DEAD or CANCELLED); Conflict otherwise."""
    job = get_job(app, job_id, tenant)
    if job.state not in (JobState.DEAD, JobState.CANCELLED):
        raise Conflict(f"only DEAD or CANCELLED jobs can be retried; {job_id} is {job.state}",
                       job_id=job_id)
    return job


def retry(app: Leasehold, job_id: str, tenant: str | None = None, *, actor: str = "api",
          reason: str = "manual retry") -> Job:
    """Re-run a DEAD or CANCELLED job that holds no live-job slot, bypassing admission.

    A job the API admitted holds a slot while it is live, so it goes back live only through
    admission (``leasehold.tenancy.admission.retry_admitted``), which takes the slot under
    its tenant's cap: here it is refused.
    """
    job = finished(app, job_id, tenant)
    if job.extra.get(COUNTED):
        raise Conflict(f"job {job_id} takes a live-job slot of its tenant when it runs again; "
                       "retry it through admission (POST /jobs/{job_id}/retry)", job_id=job_id)
    return requeue(app, job, actor=actor, reason=reason)


def restart_sets(app: Leasehold, job: Job, now: int) -> dict[str, Any]:
    """What the features' restart hooks (``Leasehold.restarts``) set on a finished job's row
    as it is re-run by hand; every manual re-run writes them with its own transition."""
    sets: dict[str, Any] = {}
    for restart in app.restarts:
        sets.update(restart(app, job, now))
    return sets


def requeue(app: Leasehold, job: Job, *, actor: str, reason: str,
            also: Sequence[Mapping[str, Any]] = (), shard: int | None = None,
            remove: Sequence[str] = ()) -> Job:
    """Put a finished job back in QUEUED from scratch (attempts reset, new epoch, no start
    window, its deadline counted from now) and hand it off. ``also``: writes committed with
    it (the admission's token and slot); ``shard``: -1 for a job admitted without a slot (no
    cap), or the admission item a counted job now
    holds its slot on (recorded on the row); ``remove``: attributes the re-run removes too
    (a reset's own hold)."""
    now = app.now()
    sets: dict[str, Any] = {"run_at": now, "attempt": 0, "crash_count": 0,
                            "lease_expires_at": handoff.handoff_deadline(now, app.settings),
                            **restart_sets(app, job, now)}
    remove = ["cancel_requested", "finished_at", "lease_owner", "first_started_at",
              START_BY, *remove]  # a manual re-run is asked for now: no start window of old
    if job.extra.get(DEADLINE) is not None:
        # Its deadline counts from the re-run too, as long as it was: one that passed while
        # the job lay finished would end the re-run at its lease without running it.
        sets[DEADLINE] = now + int(job.extra[DEADLINE]) - job.created_at
    if job.extra.get(SLOT_AT) is not None:
        # The slot the last run took before its row went back after its end (or is on its
        # way back, or is an orphan the repair returns): the re-run's slot is taken with it
        # here. The repair counts the old one's give-back as in flight for a while yet.
        remove.append(SLOT_AT)
        sets[SLOT_WAS] = {"at": int(job.extra[SLOT_AT]), "ended": _ended(job),
                          "shard": int(job.extra.get(ADMISSION_SHARD) or 0)}
    if shard == -1:  # admitted, holding no slot (its tenant has no cap now)
        sets[COUNTED] = False
        remove.append(ADMISSION_SHARD)
    elif shard is not None:
        sets[COUNTED] = True
        if shard:
            sets[ADMISSION_SHARD] = shard
        else:
            remove.append(ADMISSION_SHARD)  # absent: shard 0
    change = Change(target=JobState.QUEUED, actor=actor, reason=reason, bump_epoch=True,
                    set=sets, remove=tuple(remove), also=also)
    try:
        new = app.store.transition(job, change, now=now)
    except Cancelled as cancelled:
        if also:
            raise  # the caller reads its own writes' refusals
        # A feature's companion refused it (a unique key another live job holds).
        raise Conflict(f"job {job.job_id} cannot run again now: {cancelled}",
                       job_id=job.job_id) from None
    handoff.send(app.queues, new, now)
    return new


def _ended(job: Job) -> int:
    """When a finished job ended (its last transition)."""
    return job.history[-1].at if job.history else int(job.finished_at or 0)
