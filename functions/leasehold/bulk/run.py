"""The bulk job: pages through the tenant's matching jobs, oldest first, and acts on each.

Its progress (counts and the listing position after the last job handled) is written with
each page through the job's own heartbeat, a write fenced on its lease: a new attempt (after
a crash, a lost lease or an admission refusal) resumes from the last checkpoint. A job
handled twice across a crash is harmless: each action is a fenced write that finds the job
already changed and counts it as skipped.

Retries and redrives are admitted like submissions. When admission refuses (the tenant's
rate or live-job limit, the pool's backlog), the job checkpoints and fails this attempt with
a retryable error; its retry policy brings it back later and it resumes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from leasehold.bulk.actions import ACTIONS, APPLIES_TO, apply
from leasehold.core.context import JobContext
from leasehold.core.jobs import Job
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskDefinition
from leasehold.core.states import JobState
from leasehold.errors import RateLimited, ValidationError
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy.admission import Backlog, Limits, retry_admitted
from leasehold.tenancy.listing import JobFilter, list_jobs

TASK = "leasehold.bulk"
#: Jobs handled between two checkpoints.
PAGE = 100
#: Stop and checkpoint this long before the attempt's deadline.
RESERVE_MS = 30_000
#: A dry run examines at most this many pages of matches before answering "at least".
PREVIEW_PAGES = 20


def filter_to_payload(where: JobFilter) -> dict[str, Any]:
    out = asdict(where)
    out["states"] = sorted(s.value for s in where.states)
    out["labels"] = dict(where.labels)
    return out


def filter_from_payload(value: Mapping[str, Any]) -> JobFilter:
    fields = dict(value)
    fields["states"] = frozenset(JobState(s) for s in fields.get("states", ()))
    return JobFilter(**fields)


def effective(where: JobFilter, action: str) -> JobFilter:
    """The search with the action's own states: a retry never touches a live job."""
    if action not in ACTIONS:
        raise ValidationError("action", f"must be one of {', '.join(ACTIONS)}")
    states = APPLIES_TO[action] if not where.states else \
        frozenset(where.states) & APPLIES_TO[action]
    if not states:
        raise ValidationError("filter.state", f"{action} applies to "
                              f"{', '.join(sorted(APPLIES_TO[action]))} jobs only")
    return JobFilter(**{**asdict(where), "states": states})


def preview(app: Leasehold, tenant: str, action: str, where: JobFilter
            ) -> tuple[int, bool, list[str]]:
    """How many jobs the action would touch now: (count, complete, the first few ids).
    ``complete`` is False when the count stopped at :data:`PREVIEW_PAGES` pages."""
    search = effective(where, action)
    count, sample, after = 0, list[str](), None
    for _ in range(PREVIEW_PAGES):
        jobs, after = list_jobs(app, tenant, limit=200, where=search, after=after,
                                newest_first=False)
        count += len([job for job in jobs if job.task != TASK])
        sample += [job.job_id for job in jobs if job.task != TASK][:10 - len(sample)]
        if after is None:
            return count, True, sample
    return count, False, sample


def handler(app: Leasehold, payload: Mapping[str, Any], ctx: JobContext) -> dict[str, Any]:
    action = str(payload["action"])
    where = effective(filter_from_payload(payload["filter"]), action)
    row = app.store.get(ctx.job_id)
    # The tenant is the bulk job's own: never one the payload names.
    tenant = row.tenant
    progress: dict[str, Any] = json.loads(row.progress_json) if row.progress_json else {}
    counts = {name: int(progress.get(name, 0)) for name in ("done", "skipped")}
    after = progress.get("cursor")
    limits, backlog = Limits.from_env(), Backlog()

    def admit(job_id: str, owner: str, reason: str) -> Job:
        return retry_admitted(app, job_id, owner, limits, backlog, {}, actor="bulk",
                              reason=reason)

    while True:
        jobs, position = list_jobs(app, tenant, limit=PAGE, where=where, after=after,
                                   newest_first=False)
        for job in jobs:
            if job.job_id == ctx.job_id or job.task == TASK:
                continue  # never itself, nor another bulk job
            try:
                handled = apply(app, job, action, admit)
            except RateLimited:
                # Resume at this job next attempt: the checkpoint stays before it.
                ctx.heartbeat({**counts, "cursor": after, "action": action,
                               "paused": "admission refused; resuming later"})
                raise
            counts["done" if handled else "skipped"] += 1
            after = {"tenant": tenant, "created_at": job.created_at, "job_id": job.job_id}
        if position is not None:
            after = dict(position)
        ctx.heartbeat({**counts, "cursor": after, "action": action})
        if position is None:
            return {**counts, "action": action}
        if ctx.deadline_ms - app.now() < RESERVE_MS:
            # Checkpointed: the next attempt goes on from here, long before this one times out.
            raise MoreToDo(f"{counts['done']} done so far; continuing from the checkpoint")


class MoreToDo(Exception):
    """This attempt's time is nearly up; the next one resumes from the checkpoint."""


def install(app: Leasehold) -> None:
    """Register the built-in bulk task on ``app``'s registry (idempotent)."""
    if TASK in app.registry:
        return
    app.registry.register(TaskDefinition(
        name=TASK, fn=lambda payload, ctx: handler(app, payload, ctx),
        timeout_seconds=240.0, max_attempts=100,
        retry=RetryPolicy(min_backoff_seconds=5, max_backoff_seconds=120)))
