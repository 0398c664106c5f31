"""Per-task figures kept as stored aggregates, written in the batch that ends jobs.

A store observer sees each job that ends (SUCCEEDED counts as succeeded, DEAD as failed; a
cancelled job is neither) and keeps, per tenant and task, one item per minute and one per
hour in the tenants table, each holding the two outcome counts and two fixed histograms
(:mod:`leasehold.metrics.histogram`): the run's duration (``finished_at - started_at``) and
its queue wait (``started_at - run_at``: how long a due job waited for a worker). Within a
batch (``Leasehold.batch``: a worker's batch of records) the counts wait and go out at its
end as one atomic ``ADD`` per item touched, so a batch of ten jobs of one task costs three
writes (its minute, its hour, the tenant's day list of tasks) instead of thirty, and the day
list is written only when it gains a task this process has not added yet that day.

Cost: per batch, 2 UpdateItem per (tenant, task) plus 1 per tenant, each 1 WCU (items stay
under 1 KB: 2 counters and 32 buckets); one job alone in its batch costs 3 WCUs, a full batch
of ten of one task 0.3 WCU each. Reading the figures (``GET /stats/tasks``) is a batch read
of 2 + 85 keys per task (60 minutes, 25 hours). Items expire by TTL (``expires_at_s``): minutes
after 2 hours, hours after 2 days. Best-effort, like the outcome counts of
:mod:`leasehold.tenancy.counters`: a batch whose process dies before it ends is not counted.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from leasehold.aws.dynamo import batch_get, to_av
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.deferral import Deferred
from leasehold.metrics.histogram import BOUNDS, bucket, percentile

log = logging.getLogger(__name__)

MINUTE_MS = 60_000
HOUR_MS = 3_600_000
DAY_MS = 86_400_000
#: How long each kind of item is kept (DynamoDB TTL deletes it some time after).
KEEP_MS = {"m": 2 * HOUR_MS, "h": 2 * DAY_MS, "tasks": 2 * DAY_MS}
OUTCOMES = {JobState.SUCCEEDED: "ok", JobState.DEAD: "failed"}


@dataclass(frozen=True)
class Ended:
    """One job that ended, as the figures count it."""

    tenant: str
    task: str
    outcome: str  # "ok" or "failed"
    finished_at: int
    duration: float | None
    wait: float | None


def ended(job: Job, source: JobState | None) -> Ended | None:
    """The figures' view of a change: a live job that became SUCCEEDED or DEAD, else None."""
    if source is None or not source.live or job.state not in OUTCOMES:
        return None
    finished = job.finished_at or 0
    duration = (finished - job.started_at) / 1000 if job.started_at else None
    wait = (job.started_at - job.run_at) / 1000 if job.started_at and job.run_at else None
    return Ended(job.tenant, job.task, OUTCOMES[job.state], finished, duration,
                 max(0.0, wait) if wait is not None else None)


def minute_key(tenant: str, task: str, at_ms: int) -> str:
    return f"{tenant}#task#{task}#m#{at_ms // MINUTE_MS}"


def hour_key(tenant: str, task: str, at_ms: int) -> str:
    return f"{tenant}#task#{task}#h#{at_ms // HOUR_MS}"


def tasks_key(tenant: str, at_ms: int) -> str:
    return f"{tenant}#tasks#{at_ms // DAY_MS}"


def deltas(jobs: list[Ended]) -> dict[tuple[str, str], Counter[str]]:
    """What to ADD to which item: {(kind, key): {attribute: amount}} (pure)."""
    out: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for job in jobs:
        adds: Counter[str] = Counter({job.outcome: 1})
        if job.duration is not None:
            adds[f"d{bucket(job.duration)}"] += 1
        if job.wait is not None:
            adds[f"w{bucket(job.wait)}"] += 1
        out[("m", minute_key(job.tenant, job.task, job.finished_at))].update(adds)
        out[("h", hour_key(job.tenant, job.task, job.finished_at))].update(adds)
    return out


class TaskFigures:
    """The store observer keeping the per-task figures, batched within the app's batches."""

    def __init__(self, app: Leasehold) -> None:
        self.app = app
        self._kept: Deferred[Ended] = Deferred(self._write)
        self.batch = self._kept.batch
        #: The day lists this process has added each task to: added once a day, not once a
        #: batch (issue 21: a third of the figures' writes; the list only grows within a day).
        self._listed: set[tuple[str, str]] = set()

    def __call__(self, job: Job, source: JobState | None) -> None:
        seen = ended(job, source)
        if seen is not None and not self._kept.add(seen):
            self._write([seen])

    def _write(self, jobs: list[Ended]) -> None:
        ddb, table = self.app.clients.dynamodb, self.app.settings.tenants_table
        writes = [(kind, key, dict(adds)) for (kind, key), adds in deltas(jobs).items()]
        days: dict[str, set[str]] = defaultdict(set)
        for job in jobs:
            days[tasks_key(job.tenant, job.finished_at)].add(job.task)
        newest = max(job.finished_at for job in jobs)
        for kind, key, adds in writes:
            names = {f"#a{i}": name for i, name in enumerate(adds)}
            values: dict[str, Any] = {f":v{i}": n for i, n in enumerate(adds.values())}
            values[":e"] = (newest + KEEP_MS[kind]) // 1000
            self._update(ddb, table, key, "ADD " + ", ".join(f"#a{i} :v{i}" for i in
                                                             range(len(adds)))
                         + " SET expires_at_s = :e", names, values)
        for key, tasks in days.items():
            new = {task for task in tasks if (key, task) not in self._listed}
            if new and self._update(ddb, table, key, "ADD tasks :t SET expires_at_s = :e", {},
                                    {":t": new, ":e": (newest + KEEP_MS["tasks"]) // 1000}):
                if len(self._listed) > 10_000:
                    self._listed.clear()  # bounded: what is forgotten is only written again
                self._listed.update((key, task) for task in new)

    @staticmethod
    def _update(ddb: Any, table: str, key: str, expression: str, names: dict[str, str],
                values: dict[str, Any]) -> bool:
        request: dict[str, Any] = {
            "TableName": table, "Key": {"tenant": {"S": key}}, "UpdateExpression": expression,
            "ExpressionAttributeValues": to_av(values)}
        if names:
            request["ExpressionAttributeNames"] = names
        try:
            ddb.update_item(**request)
        except Exception:
            log.exception("could not add the task figures of %s (figures for people only)", key)
            return False
        return True


def install(app: Leasehold) -> TaskFigures:
    """Keep the per-task figures on ``app``: a store observer, batched within its batches."""
    figures = TaskFigures(app)
    app.store.observers.append(figures)
    app.batches.append(figures.batch)
    return figures


@dataclass
class Window:
    """A task's figures over one window: counts, and percentiles as bucket upper bounds."""

    succeeded: int = 0
    failed: int = 0
    durations: list[int] = field(default_factory=lambda: [0] * len(BOUNDS))
    waits: list[int] = field(default_factory=lambda: [0] * len(BOUNDS))

    def add(self, item: dict[str, Any]) -> None:
        self.succeeded += int(item.get("ok", 0))
        self.failed += int(item.get("failed", 0))
        for i in range(len(BOUNDS)):
            self.durations[i] += int(item.get(f"d{i}", 0))
            self.waits[i] += int(item.get(f"w{i}", 0))

    def view(self) -> dict[str, Any]:
        return {"succeeded": self.succeeded, "failed": self.failed,
                "duration_p50": _finite(percentile(self.durations, 0.5)),
                "duration_p99": _finite(percentile(self.durations, 0.99)),
                "wait_p50": _finite(percentile(self.waits, 0.5)),
                "wait_p99": _finite(percentile(self.waits, 0.99))}


def _finite(value: float | None) -> float | None:
    # The open last bucket has no upper bound and JSON has no infinity: its percentile reads
    # as the last finite bound (an hour: "an hour or more").
    if value is None:
        return None
    return value if value != float("inf") else BOUNDS[-2]


#: At most this many tasks are read (the figures page of a tenant with more shows these).
MAX_TASKS = 50


def read(app: Leasehold, tenant: str, now_ms: int) -> dict[str, Any]:
    """The tenant's figures: per task over the last hour and day, and the queue wait of every
    task per minute over the last hour (the console's chart)."""
    ddb, table = app.clients.dynamodb, app.settings.tenants_table
    days = batch_get(ddb, table, "tenant", [tasks_key(tenant, now_ms - DAY_MS),
                                            tasks_key(tenant, now_ms)])
    tasks = sorted({name for item in days for name in item.get("tasks", ())})[:MAX_TASKS]
    minutes = [now_ms - i * MINUTE_MS for i in range(59, -1, -1)]
    hours = [now_ms - i * HOUR_MS for i in range(24, -1, -1)]
    keys = [key for task in tasks for key in
            [minute_key(tenant, task, at) for at in minutes]
            + [hour_key(tenant, task, at) for at in hours]]
    items = {item["tenant"]: item for item in batch_get(ddb, table, "tenant", keys)}
    per_task = []
    per_minute = [Window() for _ in minutes]
    for task in tasks:
        hour, day = Window(), Window()
        for index, at in enumerate(minutes):
            item = items.get(minute_key(tenant, task, at))
            if item:
                hour.add(item)
                per_minute[index].add(item)
        for at in hours:
            item = items.get(hour_key(tenant, task, at))
            if item:
                day.add(item)
        per_task.append({"task": task, "hour": hour.view(), "day": day.view()})
    chart = [{"minute": (at // MINUTE_MS) * 60, "jobs": w.succeeded + w.failed,
              "wait_p50": w.view()["wait_p50"], "wait_p99": w.view()["wait_p99"]}
             for at, w in zip(minutes, per_minute, strict=True)]
    return {"tenant": tenant, "tasks": per_task, "queue_wait": chart,
            "buckets": [b for b in BOUNDS if b != float("inf")]}
