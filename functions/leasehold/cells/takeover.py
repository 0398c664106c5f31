"""Take-over (``leasehold regions failover --take-over``): re-create a lost Region's unfinished
jobs in the new home, at-least-once, and report every job that may run twice.

It reads the old Region's jobs table as a replica shows it (on AWS an MREC replica of A's
jobs table in B's Region; locally A's table itself), which lags A by the replication delay.
What the replica shows unfinished is submitted again in the target cell, for the tenants the
failover moved:

* a QUEUED, SCHEDULED or RUNNING job that is not a workflow's step is re-created (its
  task, payload, tenant, pool, priority, attempts, retry policy, timeout and time), under the
  idempotency key it had, else ``takeover:<region>:<job id>``, so a take-over run twice
  creates each job once, labelled ``taken_over_from``;
* a SLEEPING or WAITING job (a durable job's history, a workflow's step) is left to wait
  for its Region: its state lives in more than its row.

**At-least-once, and the bound.** A job taken over runs in the target; it also ran in A if
A started it before it was cut off (the replica showed it RUNNING: reported at once as
``may_have_run``), or if A started or finished it inside the replication lag (the replica
had not seen it: found when A returns, by :func:`retire`). Nothing else runs twice. When A
comes back, :func:`retire` cancels A's copies before A's cell works again and reports the
duplicates: the taken-over jobs A had started or finished.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from leasehold.core.jobs import Job, job_from_item
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import Conflict, LeaseholdError, NotFound
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit

log = logging.getLogger(__name__)

#: The label a taken-over job carries: ``<region>/<job id>``, where it was taken from.
TAKEN_FROM = "taken_over_from"
TAKEN = frozenset({JobState.QUEUED, JobState.SCHEDULED, JobState.RUNNING})


@dataclass(frozen=True)
class Taken:
    #: The job's id in the old Region, and its copy's id in the new home.
    source_id: str
    job_id: str
    #: The replica showed it RUNNING: it may have run (and finished) in the old Region.
    may_have_run: bool


@dataclass
class TakeOver:
    taken: list[Taken] = field(default_factory=list)
    #: Unfinished jobs left to wait for their Region (id -> why).
    left: dict[str, str] = field(default_factory=dict)

    @property
    def may_have_run(self) -> list[str]:
        return [t.source_id for t in self.taken if t.may_have_run]


def unfinished(items: Iterable[Mapping[str, Any]], tenants: Iterable[str]) -> list[Job]:
    """The replica's rows (plain items) of ``tenants``' live jobs (none of a job's other
    items: durable records and the like have no job state)."""
    chosen = set(tenants)
    jobs = []
    for item in items:
        if item.get("tenant") not in chosen or "state" not in item or "task" not in item:
            continue
        job = job_from_item(item)
        if job.state.live:
            jobs.append(job)
    return jobs


def take_over(target: Leasehold, items: Iterable[Mapping[str, Any]], *, source: str,
              tenants: Iterable[str]) -> TakeOver:
    """Re-create in ``target`` the unfinished jobs of ``tenants`` that ``items`` (the old
    Region's jobs table as a replica shows it) hold."""
    done = TakeOver()
    for job in unfinished(items, tenants):
        if job.state not in TAKEN or "workflow_id" in job.extra:
            done.left[job.job_id] = f"{job.state.value}: its state lives beyond its row"
            continue
        spec = JobSpec(
            task=job.task, payload=json.loads(job.payload_json), tenant=job.tenant,
            pool=job.pool, priority=job.priority,
            run_at_ms=job.run_at if job.state is JobState.SCHEDULED else None,
            idempotency_key=job.idempotency_key or f"takeover:{source}:{job.job_id}",
            max_attempts=job.max_attempts, retry=job.retry,
            timeout_seconds=job.timeout_seconds,
            labels={**job.labels, TAKEN_FROM: f"{source}/{job.job_id}"})
        try:
            made = submit(target, spec)
        except LeaseholdError as exc:  # e.g. a task this deployment no longer has
            done.left[job.job_id] = f"not re-created: {exc}"
            continue
        done.taken.append(Taken(source_id=job.job_id, job_id=made.job.job_id,
                                may_have_run=job.state is JobState.RUNNING))
    return done


def taken_from(items: Iterable[Mapping[str, Any]], source: str) -> list[Taken]:
    """The jobs taken over from ``source`` that a new home's jobs table holds (plain items,
    read by ``leasehold regions failback --taken-table``): their label names the source."""
    found = []
    for item in items:
        origin = str(item.get("labels", {}).get(TAKEN_FROM, ""))
        region, _, source_id = origin.rpartition("/")
        if region == source and source_id:
            found.append(Taken(source_id=source_id, job_id=str(item["job_id"]),
                               may_have_run=False))
    return found


def retire(source: Leasehold, taken: Iterable[Taken]) -> list[str]:
    """Before ``source``'s cell works again: cancel its copies of the jobs taken over
    (a running one is flagged, and ends CANCELLED when its lease is taken over), and answer
    the duplicates: the taken-over jobs ``source`` had started or finished."""
    duplicates = []
    for one in taken:
        try:
            job = source.store.get(one.source_id)
        except NotFound:
            continue
        if job.first_started_at is not None or job.state is JobState.SUCCEEDED:
            duplicates.append(one.source_id)
        if job.state.live:
            with contextlib.suppress(Conflict):  # it ended meanwhile
                control.cancel(source, one.source_id, actor="takeover")
    if duplicates:
        log.warning("taken over and also run in its Region: %s", ", ".join(duplicates))
    return duplicates
