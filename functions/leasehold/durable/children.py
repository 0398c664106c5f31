"""Child jobs a durable job starts (``ctx.spawn``) and waits for (``ctx.wait_for``).

A child's id derives from (parent, call site), and it is created by the store's conditional
put: a replay of the parent meets the child it made before and spawns nothing. Children are
internal submissions (like workflow steps): they take no live-job slot of the tenant, which
the parent already holds.

Fan-in: when a child finishes, an observer wakes its parent if the parent sleeps waiting for
children; the parent's handler runs again and ``wait_for`` looks at its children anew. A
parent that goes to sleep checks, in the same transaction, that the children it saw live are
still live, so a child that finished in between wakes it at once; and it sleeps at most
:data:`CHILD_POLL_SECONDS`, which bounds what a lost observer (a process that died between
the child's finish and the wake-up) can cost.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from leasehold.aws.dynamo import to_av
from leasehold.core.ids import derived_id
from leasehold.core.jobs import Job
from leasehold.core.spec import JobSpec, resolve
from leasehold.core.states import TERMINAL, JobState
from leasehold.core.suspension import DurableMisuse
from leasehold.errors import Conflict, NotFound
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import new_job
from leasehold.lifecycle.suspending import WAITING, wake

log = logging.getLogger(__name__)
PARENT = "parent_id"
#: The longest a parent sleeps between two looks at its children.
CHILD_POLL_SECONDS = 300
#: Children whose liveness a parent checks as it goes to sleep (a transaction holds 100
#: items: the job row, its companions, and these). Beyond, only the poll catches a race.
CHECKED_CHILDREN = 90
_OPTIONS = {"pool", "priority", "delay_seconds", "max_attempts", "timeout_seconds", "retry",
            "labels"}


def child_id(parent: Job, site: str) -> str:
    return derived_id("child", parent.job_id, site)


def spawn_child(app: Leasehold, parent: Job, site: str, task: str, payload: Any,
                options: Mapping[str, Any]) -> str:
    unknown = set(options) - _OPTIONS
    if unknown:
        raise DurableMisuse(f"ctx.spawn does not take {', '.join(sorted(unknown))}; it takes "
                            f"{', '.join(sorted(_OPTIONS))}")
    job_id = child_id(parent, site)
    now = app.now()
    spec = resolve(JobSpec(task=task, payload=payload, tenant=parent.tenant, **options),
                   app.registry, pools=app.settings.pools, now_ms=now,
                   timeout_limits=app.settings.job_timeout_limits())
    job, created = app.store.create(new_job(app, spec, now, job_id=job_id, actor=parent.job_id,
                                            extra={PARENT: parent.job_id}))
    if created:
        handoff.send(app.queues, job, now)
    return job_id


def wait_checks(app: Leasehold, live: Sequence[Job]) -> tuple[dict[str, Any], ...]:
    """Conditions the parent's move to SLEEPING carries: each child still unfinished."""
    values = to_av({f":t{i}": state.value for i, state in enumerate(sorted(TERMINAL))})
    return tuple({"ConditionCheck": {
        "TableName": app.settings.jobs_table, "Key": {"job_id": {"S": job.job_id}},
        "ConditionExpression": f"NOT #state IN ({', '.join(values)})",
        "ExpressionAttributeNames": {"#state": "state"},
        "ExpressionAttributeValues": values}} for job in live[:CHECKED_CHILDREN])


def observe(app: Leasehold) -> Any:
    """The store observer that wakes a parent when one of its children finishes."""

    def observer(job: Job, source: JobState | None) -> None:
        parent_id = job.extra.get(PARENT)
        if not parent_id or not job.state.terminal or source is None or source.terminal:
            return
        try:
            parent = app.store.get(str(parent_id))
            if parent.state is JobState.SLEEPING and parent.extra.get(WAITING) == "children":
                wake(app, parent, actor="child", reason=f"child {job.job_id} {job.state}")
        except (Conflict, NotFound):
            pass  # woken by another child already, or gone

    return observer
