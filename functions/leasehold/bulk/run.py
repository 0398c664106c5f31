"""The bulk job: pages through the tenant's matching jobs, oldest first, and acts on each.

Its progress (counts and the listing position after the last job handled) is written with
each page through the job's own heartbeat, a write fenced on its lease: a new attempt (after
a crash, a lost lease or an admission refusal) resumes from the last checkpoint. A job
handled twice across a crash is harmless: each action is a fenced write that finds the job
already changed and counts it as skipped.

The action is bounded by its request: it acts only on jobs created up to the moment it was
asked for (:func:`bounded`: the filter's ``created_before`` is the request's time, or the
user's earlier one), so a job submitted while it runs, or before a killed attempt resumes, is
never touched, and the dry run asked at the same moment counts what the action does.

A delete keeps every row something still references (a workflow's step, a live durable
parent's child: :mod:`leasehold.lifecycle.deletion`) and counts them apart, by reason
(``skipped_referenced``, ``referenced_by``); the dry run counts them the same way.

Retries and redrives are admitted like submissions. When admission refuses (the tenant's
rate or live-job limit, the pool's backlog), the job checkpoints and fails this attempt with
a retryable error; its retry policy brings it back later and it resumes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from leasehold.bulk.actions import ACTIONS, APPLIES_TO, apply
from leasehold.clock import iso
from leasehold.core.context import JobContext
from leasehold.core.jobs import Job
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskDefinition
from leasehold.core.states import JobState
from leasehold.errors import InvalidPayload, RateLimited, ValidationError
from leasehold.lifecycle import deletion
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy.admission import Backlog, retry_admitted
from leasehold.tenancy.listing import JobFilter, list_jobs
from leasehold.tenancy.plans import limits_for

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


def bounded(where: JobFilter, asked_at: int) -> JobFilter:
    """The search bounded by its request: only jobs created up to ``asked_at`` (epoch ms,
    included), or before the user's own ``created_before`` if that is earlier."""
    bound = asked_at + 1  # created_before excludes its own millisecond
    if where.created_before is not None and where.created_before <= bound:
        return where
    return JobFilter(**{**asdict(where), "created_before": bound})


def parse(payload: Any) -> tuple[str, JobFilter]:
    """The action and its search from a bulk job's payload; InvalidPayload if it is not
    one ``POST /jobs/bulk`` wrote (retrying cannot fix it)."""
    try:
        action = str(payload["action"])
        return action, effective(filter_from_payload(payload["filter"]), action)
    except (KeyError, TypeError, ValueError, ValidationError) as exc:
        raise InvalidPayload(f"a {TASK} payload is {{'action': ..., 'filter': ...}} as "
                             f"POST /jobs/bulk writes it: {type(exc).__name__}: {exc}") from None


@dataclass
class Tally:
    """What a bulk action did so far (its checkpoint and result)."""

    done: int = 0
    skipped: int = 0
    #: Kept because something still references them (a delete only), by reason.
    referenced_by: dict[str, int] = field(default_factory=dict)

    def add_referenced(self, reasons: Mapping[str, tuple[str, str]]) -> None:
        for name, _ in reasons.values():
            self.referenced_by[name] = self.referenced_by.get(name, 0) + 1

    def shown(self) -> dict[str, Any]:
        out: dict[str, Any] = {"done": self.done, "skipped": self.skipped}
        if self.referenced_by:
            out |= {"skipped_referenced": sum(self.referenced_by.values()),
                    "referenced_by": dict(self.referenced_by)}
        return out

    @classmethod
    def of(cls, progress: Mapping[str, Any]) -> Tally:
        return cls(int(progress.get("done", 0)), int(progress.get("skipped", 0)),
                   {str(k): int(v) for k, v in dict(progress.get("referenced_by", {})).items()})


def preview(app: Leasehold, tenant: str, action: str, where: JobFilter
            ) -> tuple[int, bool, list[str], Tally]:
    """How many jobs the action would touch now: (count, complete, the first few ids, and
    the jobs it would keep because they are referenced). ``complete`` is False when the
    count stopped at :data:`PREVIEW_PAGES` pages."""
    search = effective(where, action)
    count, sample, after, kept = 0, list[str](), None, Tally()
    for _ in range(PREVIEW_PAGES):
        jobs, after = list_jobs(app, tenant, limit=200, where=search, after=after,
                                newest_first=False)
        jobs = [job for job in jobs if job.task != TASK]
        if action == "delete":
            refused = deletion.referenced(app, jobs)
            kept.add_referenced(refused)
            jobs = [job for job in jobs if job.job_id not in refused]
        count += len(jobs)
        sample += [job.job_id for job in jobs][:10 - len(sample)]
        if after is None:
            return count, True, sample, kept
    return count, False, sample, kept


def handler(app: Leasehold, payload: Mapping[str, Any], ctx: JobContext) -> dict[str, Any]:
    action, where = parse(payload)
    row = app.store.get(ctx.job_id)
    # The tenant is the bulk job's own: never one the payload names. The bound is its
    # request's (the row's creation), whatever the payload says: a resumed attempt never
    # reaches jobs created after the request.
    tenant, where = row.tenant, bounded(where, row.created_at)
    progress: dict[str, Any] = json.loads(row.progress_json) if row.progress_json else {}
    tally = Tally.of(progress)
    after = progress.get("cursor")
    limits, backlog = limits_for(app, tenant), Backlog()
    bound = {"action": action, "created_before": iso(where.created_before)}

    def admit(job_id: str, owner: str, reason: str) -> Job:
        return retry_admitted(app, job_id, owner, limits, backlog, {}, actor="bulk",
                              reason=reason)

    while True:
        jobs, position = list_jobs(app, tenant, limit=PAGE, where=where, after=after,
                                   newest_first=False)
        # Never itself, nor another bulk job.
        jobs = [job for job in jobs if job.job_id != ctx.job_id and job.task != TASK]
        if action == "delete":
            deleted = deletion.delete_finished(app, jobs)
            tally.done += len(deleted.deleted)
            tally.skipped += len(deleted.changed)
            tally.add_referenced(deleted.referenced)
        for job in jobs if action != "delete" else ():
            try:
                handled = apply(app, job, action, admit)
            except RateLimited:
                # Resume at this job next attempt: the checkpoint stays before it.
                ctx.heartbeat({**tally.shown(), "cursor": after, **bound,
                               "paused": "admission refused; resuming later"})
                raise
            if handled:
                tally.done += 1
            else:
                tally.skipped += 1
            after = {"tenant": tenant, "created_at": job.created_at, "job_id": job.job_id}
        if position is not None:
            after = dict(position)
        ctx.heartbeat({**tally.shown(), "cursor": after, **bound})
        if position is None:
            return {**tally.shown(), **bound}
        if ctx.deadline_ms - app.now() < RESERVE_MS:
            # Checkpointed: the next attempt goes on from here, long before this one times out.
            raise MoreToDo(f"{tally.done} done so far; continuing from the checkpoint")


class MoreToDo(Exception):
    """This attempt's time is nearly up; the next one resumes from the checkpoint."""


def pool(app: Leasehold) -> str:
    """The pool bulk jobs run on: the first Python pool (a pool of external tasks has no
    worker that could run the built-in task). With every pool external there is no Python
    worker at all, and the first pool is kept."""
    return next(iter(app.settings.python_pools()), app.settings.pools[0])


def install(app: Leasehold) -> None:
    """Register the built-in bulk task on ``app``'s registry (idempotent), on :func:`pool`."""
    if TASK in app.registry:
        return
    app.registry.register(TaskDefinition(
        name=TASK, pool=pool(app), fn=lambda payload, ctx: handler(app, payload, ctx),
        timeout_seconds=240.0, max_attempts=100,
        retry=RetryPolicy(min_backoff_seconds=5, max_backoff_seconds=120)))
