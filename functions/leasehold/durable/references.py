"""The durable deletion guard: a finished child is kept while its parent is live.

A parent reads its children's rows whenever its handler runs again (``ctx.wait_for`` looks
at them anew on each replay), so a child's row must outlive every run of its parent: while
the parent is live (running, queued, or sleeping until its children finish), the child's row
is not deleted (``leasehold.lifecycle.deletion``).
"""

from __future__ import annotations

from collections.abc import Sequence

from leasehold.core.jobs import Job
from leasehold.durable.children import PARENT
from leasehold.lifecycle.app import Leasehold


def referenced_children(app: Leasehold, jobs: Sequence[Job]) -> dict[str, str]:
    """The children among ``jobs`` whose parent is live: id -> why."""
    children = [job for job in jobs if job.extra.get(PARENT)]
    if not children:
        return {}
    parents = {p.job_id: p for p in app.store.batch_get(
        sorted({str(job.extra[PARENT]) for job in children}))}
    return {job.job_id: f"child of live durable job {job.extra[PARENT]} "
                        f"({parents[str(job.extra[PARENT])].state})"
            for job in children
            if str(job.extra[PARENT]) in parents and parents[str(job.extra[PARENT])].state.live}
