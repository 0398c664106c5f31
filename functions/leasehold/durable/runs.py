"""A durable job re-run by hand (retry, redrive, bulk retry, a workflow's re-run step): what
its records keep and what they re-arm.

A manual re-run keeps the job's records: succeeded steps (their results, and the effects that
committed with them), sleeps (each keeps its end: one that ended is not slept again) and
completed callbacks. It re-arms the waits that ended without a value: a callback that timed
out, was failed, or was still open when the job ended waits again, with a fresh timeout and
the same token.

The job's row counts its runs (:data:`RUN`), raised by the re-run's own fenced write (the
lifecycle's ``restarts`` hook), so the re-arm cannot be lost apart from the re-run: a process
that dies right after the re-run leaves a row whose run is newer than its callbacks'. Whoever
meets such a callback next re-arms it, under its own condition: the replay (``ctx.callback``,
fenced by the lease), or a completion that lands before the replay does
(``POST /callbacks/{token}``), which then counts as this run's. Re-arming every callback in
the re-run's transaction instead would read a job's records on every retry and is bounded by
a transaction's 100 items, where a job may keep 500 records.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from leasehold.core.jobs import Job
from leasehold.lifecycle.app import Leasehold

#: The job row's count of manual re-runs (absent: 0).
RUN = "durable_run"
#: A callback record's: the run it waits in.
RECORD_RUN = "job_run"
#: A callback that ``:run`` re-arms, as a condition on its record (values ``:run`` and
#: ``:completed``): one of an earlier run that holds no value.
REARMABLE = (f"(attribute_not_exists({RECORD_RUN}) OR {RECORD_RUN} < :run) AND "
             "(attribute_not_exists(outcome) OR outcome <> :completed)")


def current(job: Job) -> int:
    return int(job.extra.get(RUN) or 0)


def restart(app: Leasehold, job: Job, now: int) -> dict[str, Any]:
    """The restart hook: the re-run's row counts one run more."""
    return {RUN: current(job) + 1}


def rearmable(record: Mapping[str, Any], run: int) -> bool:
    """Whether ``run`` re-arms this callback record (:data:`REARMABLE`, in Python)."""
    return int(record.get(RECORD_RUN) or 0) < run and record.get("outcome") != "completed"


def values(run: int) -> dict[str, Any]:
    return {":run": run, ":completed": "completed"}
