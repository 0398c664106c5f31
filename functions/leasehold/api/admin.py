"""Routes for operators: workers, dead letters, stats and health."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Query

from leasehold import __version__
from leasehold.api import context
from leasehold.api.answers import answers, view
from leasehold.api.flow import key_out
from leasehold.api.models import JobPage
from leasehold.api.ops_models import (
    Health,
    LimitsOut,
    QueueStats,
    RedriveIn,
    RedriveOut,
    StatsOut,
    WorkerOut,
    WorkersOut,
)
from leasehold.clock import iso
from leasehold.core.states import JobState
from leasehold.errors import ValidationError
from leasehold.flow import key_usage as flow_keys
from leasehold.lifecycle import deadletters, fleet
from leasehold.tenancy import stats
from leasehold.tenancy.admission import retry_admitted
from leasehold.tenancy.listing import JobFilter, list_jobs
from leasehold.tenancy.plans import read_plan

router = Router()


@router.get("/healthz", summary="Liveness", tags=["admin"])
def healthz() -> Health:
    return Health(status="ok", time=iso(context.leasehold(router).now()) or "",
                  version=__version__)


@router.get("/workers", summary="Live workers: polling and remote", tags=["admin"],
            responses=answers(WorkersOut, 401, 422))
def workers(pool: Annotated[str | None, Query(min_length=1, max_length=32)] = None) -> WorkersOut:
    app = context.leasehold(router)
    context.tenant(router)  # any authenticated caller may look; workers are shared
    return WorkersOut(workers=[
        WorkerOut(worker_id=w.worker_id, pool=w.pool, host=w.host, pid=w.pid,
                  started_at=iso(w.started_at) or "", last_heartbeat=iso(w.last_heartbeat) or "",
                  current_jobs=list(w.current_jobs), processed=w.processed,
                  kind="remote" if w.kind == "remote" else "python")
        for w in fleet.live_workers(app, pool=pool)])


def _known_pool(pool: str, pools: tuple[str, ...]) -> str:
    if pool not in pools:
        raise ValidationError("pool", f"unknown pool {pool!r}; known: {', '.join(pools)}")
    return pool


@router.get("/dead-letters", summary="Your DEAD jobs, newest first", tags=["dead-letters"],
            responses=answers(JobPage, 400, 401, 422))
def dead_letters(
    pool: Annotated[str | None, Query(min_length=1, max_length=32)] = None,
    task: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> JobPage:
    app = context.leasehold(router)
    tenant = context.tenant(router)
    jobs, _ = list_jobs(app, tenant, limit=limit,
                        where=JobFilter(states={JobState.DEAD}, task=task, pool=pool))
    return JobPage(jobs=[view(j) for j in jobs])


@router.post("/dead-letters/redrive", summary="Re-queue your DEAD jobs of a pool",
             description="Each job is admitted like a submission: what your rate and "
                         "live-job limit let through is re-queued, the rest stays DEAD "
                         "(`left_in_place`, `left_because`).",
             tags=["dead-letters"], responses=answers(RedriveOut, 400, 401, 422))
def redrive(body: RedriveIn) -> RedriveOut:
    app, api = context.leasehold(router), context.config(router)
    tenant = context.tenant(router)
    pool = _known_pool(body.pool, app.settings.pools)

    def retry(job_id: str) -> object:
        return retry_admitted(app, job_id, tenant, api.limits_for(app, tenant), api.backlog,
                              api.buckets,
                              actor=deadletters.ACTOR, reason=deadletters.REASON)

    report = deadletters.redrive(app, tenant, pool=pool, task=body.task, limit=body.limit,
                                 retry=retry)
    return RedriveOut(redriven=report.redriven, stale_removed=report.stale_removed,
                      left_in_place=report.left_in_place, left_because=report.left_because,
                      retry_after_seconds=report.retry_after)


@router.get("/stats", summary="Your jobs by state, and queue depths", tags=["admin"],
            responses=answers(StatsOut, 401, 422))
def get_stats() -> StatsOut:
    app = context.leasehold(router)
    tenant = context.tenant(router)
    limits = context.config(router).limits_for(app, tenant)
    by_state, live = stats.counts(app, tenant, limits.shard_count())
    orphans = stats.orphans(app, tenant, limits.shard_count(), app.now()) \
        if limits.capped else 0
    return StatsOut(tenant=tenant, jobs=by_state, live=live, orphan_slots=orphans, queues=[
        QueueStats(pool=q.pool, priority=q.priority, queue=q.queue,  # type: ignore[arg-type]
                   visible=q.visible, in_flight=q.in_flight, delayed=q.delayed,
                   dead_letters=q.dead_letters, oldest_age_seconds=q.oldest_age_seconds)
        for q in stats.queue_depths(app)],
        keys=[key_out(k) for k in flow_keys.keys(app, tenant)],
        limits=LimitsOut(**limits.shown(), plan=bool(read_plan(app, tenant))))
