"""The schedule model: what a schedule stores, its states, and how the API shows it.

A schedule stores what it fires (a resolved job template, or a whole workflow resolved
likewise), its timing (expression, zone, bounds), its misfire and overlap policies, and a
cursor ``next_fire_at`` that only the ticker advances. ``config_version`` changes only when a
user changes the schedule, and is part of each run's id, so runs fired under an old
configuration never block the new one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from leasehold.clock import iso
from leasehold.time.cron import Timing, parse
from leasehold.time.firing import MisfirePolicy, OverlapPolicy, Rules
from leasehold.time.templates import JobTemplate, WorkflowTemplate

MAX_PREVIEW = 100
MAX_JITTER_SECONDS = 3600
MAX_CATCH_UP = 1000
#: Fields that change when (or what) the schedule fires: changing one re-plans its future.
TIMING_FIELDS = frozenset({"cron", "timezone", "start_at", "end_at"})
TEMPLATE_FIELDS = frozenset({"task", "target", "payload", "pool", "priority", "max_attempts",
                             "timeout_seconds", "labels",
                             # flow control (leasehold.flow)
                             "concurrency", "throttle", "unique", "debounce",
                             "start_within_seconds"})
#: What the schedule fires: a job (the template fields) or a whole workflow, not both.
TARGET_FIELDS = TEMPLATE_FIELDS | {"workflow"}
POLICY_FIELDS = frozenset({"misfire_policy", "overlap_policy", "starting_deadline_seconds",
                           "max_catch_up", "max_runs", "jitter_seconds", "name"})
FIELDS = TIMING_FIELDS | TARGET_FIELDS | POLICY_FIELDS


class ScheduleState(StrEnum):
    ACTIVE = "ACTIVE"
    PAUSED = "PAUSED"
    #: No fire times left (past ``end_at`` or ``max_runs`` reached).
    COMPLETED = "COMPLETED"


@dataclass(frozen=True, kw_only=True)
class Schedule:
    schedule_id: str
    tenant: str
    name: str
    cron: str
    timezone: str
    #: Exactly one of these: the job each occurrence fires, or the workflow it starts.
    template: JobTemplate | None = None
    workflow: WorkflowTemplate | None = None
    misfire_policy: MisfirePolicy = MisfirePolicy.FIRE_ONCE
    overlap_policy: OverlapPolicy = OverlapPolicy.ALLOW
    starting_deadline_seconds: float = 300.0
    max_catch_up: int = 10
    start_at: int | None = None
    end_at: int | None = None
    max_runs: int | None = None
    jitter_seconds: float = 0.0
    state: ScheduleState = ScheduleState.ACTIVE
    next_fire_at: int | None = None
    run_count: int = 0
    skipped_count: int = 0
    last_fired_at: int | None = None
    #: The last run's id: a job's, or a workflow's for a workflow schedule.
    last_job_id: str | None = None
    created_at: int = 0
    updated_at: int = 0
    version: int = 1
    config_version: int = 1
    #: Fire failures since the last successful fire (a user's change resets them): the
    #: latest one's short message and time, and the earliest the ticker tries again.
    failures: int = 0
    last_error: str | None = None
    last_error_at: int | None = None
    retry_at: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def timing(self) -> Timing:
        return Timing(parse(self.cron), self.timezone, start_at=self.start_at,
                      end_at=self.end_at, anchor=self.created_at)

    def rules(self) -> Rules:
        return Rules(
            schedule_id=self.schedule_id, timing=self.timing(), misfire=self.misfire_policy,
            overlap=self.overlap_policy,
            starting_deadline_ms=int(self.starting_deadline_seconds * 1000),
            max_catch_up=self.max_catch_up, max_runs=self.max_runs,
            jitter_ms=int(self.jitter_seconds * 1000),
        )

    def view(self) -> dict[str, Any]:
        """The schedule as the API and CLI show it (times as ISO-8601 UTC)."""
        job = self.template
        return {
            "schedule_id": self.schedule_id, "tenant": self.tenant, "name": self.name,
            "cron": self.cron, "timezone": self.timezone,
            "task": job and job.task, "payload": job and job.payload, "pool": job and job.pool,
            "priority": job and job.priority, "max_attempts": job and job.max_attempts,
            "timeout_seconds": job and job.timeout_seconds,
            "labels": dict(job.labels) if job else None,
            "concurrency": job.options.get("concurrency") if job else None,
            "throttle": job.options.get("throttle") if job else None,
            **{name: job.options.get(name) if job else None
               for name in ("unique", "debounce", "start_within_seconds")},
            "workflow": self.workflow.view() if self.workflow else None,
            "misfire_policy": self.misfire_policy.value,
            "overlap_policy": self.overlap_policy.value,
            "starting_deadline_seconds": self.starting_deadline_seconds,
            "max_catch_up": self.max_catch_up, "start_at": iso(self.start_at),
            "end_at": iso(self.end_at), "max_runs": self.max_runs,
            "jitter_seconds": self.jitter_seconds, "state": self.state.value,
            "next_fire_at": iso(self.next_fire_at), "run_count": self.run_count,
            "skipped_count": self.skipped_count, "last_fired_at": iso(self.last_fired_at),
            "last_job_id": None if self.workflow else self.last_job_id,
            "last_workflow_id": self.last_job_id if self.workflow else None,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at), "version": self.version,
            "failures": self.failures, "last_error": self.last_error,
            "last_error_at": iso(self.last_error_at), "retry_at": iso(self.retry_at),
        }
