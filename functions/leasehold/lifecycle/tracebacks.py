"""A failed attempt's error: an excerpt on the row, the whole of it in an item of its own.

A traceback runs to kilobytes (``core.failures.MAX_TRACEBACK``). On the row it pushed a
retried job past 1 KB, so every later write of the row (the lease, the finish, each retry)
cost a write unit more per started KB, for the rest of the job's life. The row now keeps
the error's type, its types (retry policies match them) and the first :data:`EXCERPT`
characters of its message; the full message and traceback go to one item per job in the
coordination table (``traceback#{job_id}``), written just before the transition that
records the failure and overwritten by the next failure. The row's error names the epoch of
the attempt it describes (``kept``), and the item carries the same epoch: the job view
shows the item only when the two agree, so a process killed between the item's write and
the row's (the attempt is run again) never shows a traceback the row does not record.

The item's write is best-effort: a failure to write it (a throttle past the retries) is
logged and the row's excerpt stands alone; the attempt's outcome never waits on it. It
expires with the job's retention (``expires_at_s``, the table's TTL attribute) and is
read only after the row, by its job id, so a tenant sees it only through its own job.
"""

from __future__ import annotations

import logging
from typing import Any

from leasehold.aws.dynamo import to_av
from leasehold.core import retention
from leasehold.core.jobs import Job, JobError
from leasehold.lifecycle.app import Leasehold

log = logging.getLogger(__name__)

#: Characters of an error's message the row keeps (the item keeps it whole); a kept
#: attempt error (``attempt_errors``) keeps :data:`~leasehold.core.jobs.ATTEMPT_EXCERPT`.
EXCERPT = 80
#: The coordination table's partition of a job's kept error.
PARTITION = "traceback#"
SORT = "last"
DAY_S = 86_400


def _key(job_id: str) -> dict[str, Any]:
    return {"pk": {"S": PARTITION + job_id}, "sk": {"S": SORT}}


def row_error(app: Leasehold, job: Job, failure: JobError) -> dict[str, Any]:
    """The error the row records for ``job``'s failed attempt (at its epoch), after the
    whole of it was kept in its own item when it does not fit the excerpt."""
    error: dict[str, Any] = {"type": failure.type, "message": failure.message[:EXCERPT],
                             "types": list(failure.types)}
    if (failure.traceback or len(failure.message) > EXCERPT) and _keep(app, job, failure):
        error["kept"] = job.epoch
    return error


def _keep(app: Leasehold, job: Job, failure: JobError) -> bool:
    kept: dict[str, Any] = {"epoch": job.epoch, "message": failure.message,
                            "traceback": failure.traceback}
    days = retention.days_for(job.extra, app.settings.retention_days)
    if days:  # 0: kept for as long as the job is
        # A day past the row's own retention, which counts from the job's end, not before.
        kept["expires_at_s"] = app.now() // 1000 + (days + 1) * DAY_S
    item = {**_key(job.job_id), **to_av(kept)}
    try:
        app.clients.dynamodb.put_item(TableName=app.settings.coordination_table, Item=item)
    except Exception:
        log.warning("could not keep the traceback of %s (its row keeps an excerpt)",
                    job.job_id, exc_info=True)
        return False
    return True


def full_error(app: Leasehold, job: Job) -> JobError | None:
    """``job``'s last error with its message and traceback whole, when they were kept for
    the attempt the row records (one ``GetItem``; none for a job without a kept error)."""
    error = job.error
    if error is None or error.kept is None:
        return error
    try:
        item = app.clients.dynamodb.get_item(TableName=app.settings.coordination_table,
                                             Key=_key(job.job_id)).get("Item")
    except Exception:
        log.warning("could not read the traceback of %s", job.job_id, exc_info=True)
        return error
    if item is None or int(item["epoch"]["N"]) != error.kept:
        return error
    return JobError(type=error.type, message=item.get("message", {}).get("S", error.message),
                    traceback=item.get("traceback", {}).get("S", ""), types=error.types,
                    kept=error.kept)
