"""What one bulk action does to one job, each a fenced conditional write.

* ``retry``: a DEAD or CANCELLED job back to QUEUED through admission, as a submission.
* ``redrive``: the same, for DEAD jobs only (their DLQ copies turn stale; a later redrive of
  the queue drops them).
* ``cancel``: a live job cancelled (a RUNNING one is flagged and stops at its heartbeat).
* ``delete``: a finished job's row deleted (on the condition that it is still in the state
  and epoch read: a job retried meanwhile is live and is kept), unless something still
  references it (:mod:`leasehold.lifecycle.deletion`: a workflow's step, a durable child).
"""

from __future__ import annotations

from collections.abc import Callable

from leasehold.core.jobs import Job
from leasehold.core.states import TERMINAL, JobState
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle import control, deletion
from leasehold.lifecycle.app import Leasehold

ACTIONS = ("retry", "cancel", "redrive", "delete")
#: The states each action applies to: a match in another state is counted as skipped.
APPLIES_TO: dict[str, frozenset[JobState]] = {
    "retry": frozenset({JobState.DEAD, JobState.CANCELLED}),
    "redrive": frozenset({JobState.DEAD}),
    "cancel": frozenset(s for s in JobState if s.live),
    "delete": TERMINAL,
}
ACTOR = "bulk"

#: Re-runs a finished job through admission: (job id, tenant, reason) -> the job.
Admit = Callable[[str, str, str], Job]


def apply(app: Leasehold, job: Job, action: str, admit: Admit) -> bool:
    """Do ``action`` to ``job``; False if it does not apply (any more). Admission refusals
    (:class:`~leasehold.errors.RateLimited`) propagate: the caller pauses and resumes."""
    if job.state not in APPLIES_TO[action]:
        return False
    try:
        if action in ("retry", "redrive"):
            admit(job.job_id, job.tenant, "bulk " + action)
        elif action == "cancel":
            control.cancel(app, job.job_id, job.tenant, actor=ACTOR)
        else:
            return job.job_id in deletion.delete_finished(app, [job]).deleted
    except (Conflict, NotFound):
        return False  # it changed since the search read it: not ours to touch
    return True
