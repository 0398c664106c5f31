"""``GET /stats/tasks``: the caller's per-task figures over the last hour and day, and the
queue wait per minute over the last hour, from the stored aggregates of
:mod:`leasehold.metrics.figures` (never from a scan of jobs)."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, Field

from leasehold.api import context
from leasehold.api.answers import answers
from leasehold.metrics import figures

router = Router()


class WindowOut(BaseModel):
    succeeded: int
    failed: int
    duration_p50: float | None = Field(description="seconds: the upper bound of the "
                                                   "histogram bucket the median falls in")
    duration_p99: float | None
    wait_p50: float | None = Field(description="queue wait (run_at to start), seconds")
    wait_p99: float | None


class TaskFiguresOut(BaseModel):
    task: str
    hour: WindowOut = Field(description="the last 60 minutes")
    day: WindowOut = Field(description="the last 24 hours and the current one")


class MinuteOut(BaseModel):
    minute: int = Field(description="the minute's start, epoch seconds")
    jobs: int
    wait_p50: float | None
    wait_p99: float | None


class FiguresOut(BaseModel):
    tenant: str
    tasks: list[TaskFiguresOut]
    queue_wait: list[MinuteOut] = Field(description="every task, per minute, oldest first")
    buckets: list[float] = Field(description="the histogram's bucket upper bounds, seconds")


@router.get("/stats/tasks", summary="Your tasks' succeeded, failed and duration and "
            "queue-wait percentiles, last hour and day", tags=["admin"],
            responses=answers(FiguresOut, 401, 422))
def task_figures() -> FiguresOut:
    app = context.leasehold(router)
    tenant = context.tenant(router)
    return FiguresOut.model_validate(figures.read(app, tenant, app.now()))
