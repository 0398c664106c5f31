"""Which live jobs still need a patch's old branch (``GET /jobs?patch=<id>``, issue 36).

A job needs the old branch of ``ctx.patched("id")`` if its history went past that point
without the patch, and only a replay of its history on the code can tell for sure (that is
``leasehold replay``, which reports each job's answers). Without running the code, a live
durable job is counted as still needing it unless:

- its history holds the patch's marker (it took the new branch, for good), or
- the code version that first ran it is one that knows the patch: every execution that asks
  ``ctx.patched("id")`` adds its code version to the patch's item (once per process), and a
  job begun on such a version has the patch's call in its history's way from the start, so
  it can only take the new branch.

So the answer may count too many (a job begun on older code that has not reached the point
yet: it will take the new branch), never too few. It is safe to replace ``patched`` with
``deprecate_patch`` once it is empty. The item lives in the coordination table
(``pk = "durable-patches"``, ``sk`` = the change id, ``versions``: a string set): a
deployment's code, the same for every tenant; each tenant's listing only tests its own jobs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.core.jobs import CODE_VERSION, Job
from leasehold.durable import records
from leasehold.durable.history import PATCH
from leasehold.lifecycle.app import Leasehold

log = logging.getLogger(__name__)
PK = "durable-patches"
_noted: set[tuple[int, str, str, str]] = set()
_lock = threading.Lock()


def note(app: Leasehold, change: str) -> None:
    """This process's code version knows ``change`` (once per process and table). A lost
    note only makes ``needs`` count more jobs (it is tried again by the next process)."""
    version = app.settings.code_version
    key = (id(app.clients.dynamodb), app.settings.coordination_table, change, version)
    if not version or key in _noted:
        return
    try:
        app.clients.dynamodb.update_item(
            TableName=app.settings.coordination_table,
            Key={"pk": {"S": PK}, "sk": {"S": change}},
            UpdateExpression="ADD versions :v", ExpressionAttributeValues={
                ":v": {"SS": [version]}})
    except (ClientError, BotoCoreError):
        log.warning("could not note that code version %s knows patch %s", version, change,
                    exc_info=True)
        return
    with _lock:
        _noted.add(key)


def versions(app: Leasehold, change: str) -> set[str]:
    """The code versions known to have the patch."""
    item = app.clients.dynamodb.get_item(
        TableName=app.settings.coordination_table, ConsistentRead=True,
        Key={"pk": {"S": PK}, "sk": {"S": change}}).get("Item") or {}
    return set(item.get("versions", {}).get("SS", ()))


def needs(app: Leasehold, change: str) -> Callable[[Job], bool]:
    """The test of a job for ``GET /jobs?patch=``: a live durable job that may still take
    the old branch of ``change`` (see above). Reads the patch's item once, and up to two of
    each live job's records."""
    known = versions(app, change)

    def test(job: Job) -> bool:
        if not job.state.live or job.extra.get(CODE_VERSION) in known:
            return False
        if records.get(app, job.job_id, PATCH + change) is not None:
            return False
        return records.has_any(app, job.job_id)

    return test
