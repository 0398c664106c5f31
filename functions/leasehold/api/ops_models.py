"""The API's bodies for operating a deployment: workers, queues, flow keys, pools, stats,
dead-letter redrive and health (split from :mod:`leasehold.api.models`, which keeps the jobs'
own bodies and the shared types)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from leasehold.api.models import PoolName, Priority, TaskName, _Strict


class RedriveIn(_Strict):
    pool: PoolName = "default"
    task: TaskName | None = None
    limit: int = Field(default=100, ge=1, le=1000)


class RedriveOut(BaseModel):
    redriven: list[str]
    #: DLQ copies removed because their job was no longer DEAD (already retried or redriven).
    stale_removed: int = 0
    left_in_place: int = Field(default=0, description=(
        "DEAD jobs found but left DEAD because admission refused them (your rate, your "
        "live-job limit or the pool's backlog): redrive again later"))
    left_because: str | None = Field(default=None, description="why they were left")
    retry_after_seconds: float | None = Field(
        default=None, description="when admission may have room again")


class WorkerOut(BaseModel):
    worker_id: str
    pool: str
    host: str
    pid: int
    started_at: str
    last_heartbeat: str
    current_jobs: list[str] = Field(default_factory=list, description="the jobs it runs now "
                                    "(a remote worker: those its last lease request got)")
    processed: int = Field(default=0, description="jobs run (a remote worker: jobs leased)")
    kind: Literal["python", "remote"] = Field(
        default="python", description="python: a polling worker; remote: a worker in any "
        "language (docs/protocol.md), last_heartbeat being its last lease request")


class WorkersOut(BaseModel):
    workers: list[WorkerOut]


class QueueStats(BaseModel):
    pool: str
    priority: Priority
    queue: str
    visible: int
    in_flight: int
    delayed: int
    dead_letters: int
    #: From CloudWatch's ApproximateAgeOfOldestMessage where available (null locally).
    oldest_age_seconds: float | None = None


class FlowKeyOut(BaseModel):
    key: str
    in_use: int
    limit: int | None = None
    paused: bool = False
    waiting: int = Field(description="jobs parked for a slot (counted up to 100)")
    waiting_jobs: list[str] = Field(default_factory=list, description="the oldest, up to 10")


class PoolPauseOut(BaseModel):
    pool: str
    paused: bool


class FlowKeysOut(BaseModel):
    keys: list[FlowKeyOut]


class LimitsOut(BaseModel):
    """The admission limits in force for the caller: the deployment's, with the tenant's
    plan over them."""

    rate: float = Field(description="submissions per second the tenant earns")
    burst: float = Field(description="submissions it may make at once")
    max_live: int | None = Field(description="live jobs it may have (null: no cap), API "
                                             "submissions and their children alike")
    max_backlog: int = Field(description="visible messages in a pool's queues past which "
                                         "every submission gets 503")
    admission_items: int = Field(description="admission items its rate and cap are spread "
                                             "over")
    plan: bool = Field(description="whether a plan of the tenant's own overrides the "
                                   "deployment's limits")


class StatsOut(BaseModel):
    tenant: str
    jobs: dict[str, int] = Field(description=(
        "finished jobs of every origin (API, schedules, triggers, workflow steps) by outcome: "
        "SUCCEEDED, DEAD, CANCELLED, counted once each as they finish (not reduced when "
        "retention deletes rows)"))
    live: int = Field(description=(
        "live jobs (not yet finished) that you submitted through the API (POST /jobs, a "
        "retry or a redrive): the count your live-job limit applies to. Runs of schedules "
        "and triggers and workflow steps are not in it: a page showing live jobs by state "
        "must count those from the job list, and say which it shows"))
    orphan_slots: int = Field(default=0, description=(
        "slots of your live-job limit counted with no live job behind them: a submission or "
        "an ending cut short between its two writes left them, and the sweeper's repair "
        "returns them within 2 minutes (they count against your limit until then)"))
    queues: list[QueueStats]
    #: Concurrency keys in use (leasehold.flow).
    keys: list[FlowKeyOut] = Field(default_factory=list)
    limits: LimitsOut | None = Field(default=None, description=(
        "the admission limits in force for you (rate, burst, live-job cap, backlog)"))


class Health(BaseModel):
    status: Literal["ok"]
    time: str
    version: str = Field(description="the Leasehold version serving the API, as "
                                     "`leasehold --version` says")
