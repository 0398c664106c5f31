"""Reset a durable job from a step: its records from that step on are dropped and it runs
again, admitted like a retry (issue 36; ``POST /jobs/{id}/reset``).

What it keeps and drops:

- the records before the step stay: their results answer the replay, as in any re-run;
- the step's record and every later one (steps, sleeps, callbacks, spawns), in the order the
  execution recorded them (:func:`order`), are deleted, so the re-run does that work again;
- children: one spawned before the step is kept (its record stays and answers the replay; a
  re-run spawns again one that ended unfinished, as a retry does); one spawned from the step
  on is cancelled if it is live, the parent's own and spawned with ``on_parent_end="cancel"``
  (before the records go), and the re-run spawns it again under a new id (the job's run
  counter moves, ``durable/runs.py``); an ``abandon`` child is left to run.

The re-run is the manual re-run of the lifecycle (``control.requeue``, through admission for a
finished job: backlog, rate and live-job cap, as ``POST /jobs/{id}/retry``), so it also counts
a run (callbacks kept from before the step that ended without a value wait again). It applies
to SUCCEEDED, DEAD and CANCELLED jobs, and to a SLEEPING (a sleep, a callback, children) or
QUEUED one, whose wait it ends (the epoch moves: the sleep's message is stale, a dropped
callback's token answers 404). A RUNNING job is refused (409): its attempt writes records.

Faults. Up to :data:`ONE_WRITE` records go in the re-run's own transaction: any crash leaves
the job as it was or reset. More records, or children to cancel, take several writes: first
a hold on the row (``reset_from``, :mod:`leasehold.core.holds`), which the lease refuses;
then the children's cancels and the deletions, newest first (a crash between two leaves a
prefix of the history); then the re-run, which lifts the hold in its own write. A process
killed anywhere in between leaves a job that cannot start (a plain retry re-runs it still
held); the reset asked again (with the same step) finishes it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from leasehold.core.holds import RESET_FROM
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.durable import records
from leasehold.durable.children import CANCEL, CHILD, ON_PARENT_END, PARENT
from leasehold.errors import Conflict, NotFound, ValidationError
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import ConditionFailed

#: Records deleted in the re-run's own transaction (100 items, less the row, its admission's
#: writes and the features' companions).
ONE_WRITE = 80
#: A DynamoDB ``BatchWriteItem`` holds 25 requests.
BATCH = 25
#: States a job may be reset in.
RESETTABLE = (JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED, JobState.SLEEPING,
              JobState.QUEUED)
#: The record of a step.
STEP = "step#"
#: The place of a record in its execution (durable/history.py writes it, issue 36).
SEQ = "seq"

#: How the finished job's re-run is admitted: (the job as read, its deletions, what it
#: removes, the reason) -> the job as it is after (the API passes its admission).
Rerun = Callable[[Job, Sequence[Mapping[str, Any]], Sequence[str], str], Job]


def order(record: Mapping[str, Any]) -> tuple[int, int, str]:
    """A record's place in its execution: its ``seq`` when it has one; a record from before
    places were written sorts first, by its time."""
    if record.get(SEQ) is not None:
        return (1, int(record[SEQ]), "")
    return (0, int(record.get("at") or 0), str(record.get("sk", "")))


def dropped(stored: Mapping[str, Mapping[str, Any]], step: str) -> list[dict[str, Any]]:
    """The records a reset from ``step`` drops: the step's and every later one, newest
    first (the order of their deletions)."""
    start = order(stored[STEP + step])
    return sorted((dict(r) for r in stored.values() if order(r) >= start),
                  key=order, reverse=True)


def reset(app: Leasehold, job_id: str, tenant: str | None, from_step: str, rerun: Rerun,
          *, actor: str = "api") -> Job:
    """Reset ``job_id`` from its step ``from_step``; the job as it is after (QUEUED).

    ``rerun`` re-runs a finished job (through admission); a live one is put back QUEUED
    here, holding the slot it holds. Raises :class:`ValidationError` (``from_step``) for a
    step the job has not recorded, :class:`Conflict` for a RUNNING job or another state.
    """
    job = _resettable(app, job_id, tenant)
    underway = job.extra.get(RESET_FROM)
    if underway is not None and underway != from_step:
        raise Conflict(f"a reset of job {job_id} from step {underway!r} is under way: ask "
                       "for it again to finish it", job_id=job_id)
    stored = records.load(app, job_id)
    if STEP + from_step not in stored:
        if underway is None:
            steps = sorted(sk[len(STEP):] for sk in stored if sk.startswith(STEP))
            raise ValidationError("from_step", f"job {job_id} recorded no step {from_step!r}"
                                  f" (its steps: {', '.join(steps) or 'none'})")
        drop: list[dict[str, Any]] = []  # every deletion was done: the re-run is left
    else:
        drop = dropped(stored, from_step)
    deletions = [_delete(app, job_id, str(r["sk"])) for r in drop]
    children = _cancellable(app, job, drop)
    if underway is None and (children or len(deletions) > ONE_WRITE):
        # Several writes: the job cannot start (nor a woken parent) until the last one.
        job = _hold(app, job, from_step)
    if children:
        for child in children:
            with contextlib.suppress(Conflict, NotFound):  # it finished meanwhile
                control.cancel(app, child.job_id, actor="reset")
        # A cancelled child wakes its parent (SLEEPING -> QUEUED): read it as it is now.
        job = _resettable(app, job_id, tenant)
    if len(deletions) > ONE_WRITE:
        _delete_alone(app, deletions)
        deletions = []
    reason = f"reset from step {from_step!r}"
    remove = [RESET_FROM]
    if job.state.terminal:
        return rerun(job, deletions, remove, reason)
    return control.requeue(app, job, actor=actor, reason=reason, also=deletions,
                           remove=remove)


def _resettable(app: Leasehold, job_id: str, tenant: str | None) -> Job:
    job = control.get_job(app, job_id, tenant)
    if job.state not in RESETTABLE:
        raise Conflict(f"job {job_id} is {job.state}: a reset applies to a SUCCEEDED, DEAD, "
                       "CANCELLED, SLEEPING or QUEUED job"
                       + (" (wait for its attempt to end, or cancel it)"
                          if job.state is JobState.RUNNING else ""), job_id=job_id)
    if job.extra.get("workflow_id"):
        raise Conflict(f"job {job_id} is a workflow's step: retry the workflow from it "
                       "instead", job_id=job_id)
    return job


def _delete(app: Leasehold, job_id: str, sk: str) -> dict[str, Any]:
    return {"Delete": {"TableName": app.settings.coordination_table,
                       "Key": {"pk": {"S": records.partition(job_id)}, "sk": {"S": sk}}}}


def _hold(app: Leasehold, job: Job, from_step: str) -> Job:
    try:
        return app.store.set_hold(job, set={RESET_FROM: from_step}, remove=())
    except ConditionFailed:
        raise Conflict(f"job {job.job_id} changed; try again", job_id=job.job_id) from None


def _delete_alone(app: Leasehold, deletions: Sequence[Mapping[str, Any]]) -> None:
    """The deletions of a held job, newest first, in batches: a crash between two leaves a
    prefix of its history (and the hold)."""
    ddb = app.clients.dynamodb
    for start in range(0, len(deletions), BATCH):
        batch = [{"DeleteRequest": {"Key": d["Delete"]["Key"]}}
                 for d in deletions[start:start + BATCH]]
        pending: dict[str, Any] = {app.settings.coordination_table: batch}
        while pending:
            pending = ddb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


def _cancellable(app: Leasehold, job: Job, drop: Sequence[Mapping[str, Any]]) -> list[Job]:
    """The live children whose spawns the reset drops (the parent's own, spawned with
    ``on_parent_end="cancel"``): cancelled, and spawned again by the re-run."""
    ids = [str(r["job_id"]) for r in drop if str(r.get("sk", "")).startswith(CHILD)
           and r.get(ON_PARENT_END, CANCEL) == CANCEL and r.get("own", True)]
    return [child for child in app.store.batch_get(ids)
            if child.state.live and child.extra.get(PARENT) == job.job_id]
