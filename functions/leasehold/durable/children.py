"""Child jobs a durable job starts (``ctx.spawn``) and waits for (``ctx.wait_for``).

A spawn is a submission like any other: the child's spec goes through the app's intakes
(its task's ``unique``, ``debounce`` and start-window defaults apply) and takes a live-job
slot of its tenant under the cap, in the one transaction that puts the child's row, its
record in the parent's partition and a check that the parent still holds its lease. The
child's id derives from (parent, call site); its record (``child#<site>``) is what a replay
of the parent finds, so a spawn is answered once per call site, also when an intake
answered with another job (a unique key's live holder, a debounce window).

A spawn over the tenant's cap suspends the parent, which tries again when one of its children
ends or after :data:`ADMISSION_POLL_SECONDS`; a spawn the cap can never admit (the slots its
own chain of ancestors holds while they wait fill it) fails at once, as does the spawn past
:data:`MAX_CHILDREN`.

Fan-in: when a child finishes, an observer wakes its parent if the parent sleeps waiting for
children; the parent's handler runs again and ``wait_for`` looks at its children anew. A
parent that goes to sleep checks, in the same transaction, that the children it saw live are
still live, so a child that finished in between wakes it at once; and it sleeps at most
:data:`CHILD_POLL_SECONDS`, which bounds what a lost observer (a process that died between
the child's finish and the wake-up) can cost.

Parent end: when a parent ends (any terminal state) its live children spawned with
``on_parent_end="cancel"`` (the default) are cancelled, a RUNNING one by a cancel request.
The observer does it right after the parent's terminal write; the row is the outbox for a
process that dies in between: every such spawn also puts an *open parent* item
(:data:`OPEN` partitions of the coordination table), deleted once the children are
cancelled, and the sweeper's ``children`` repair cancels the children of every open parent
that has ended.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import Cancelled, query, to_av
from leasehold.core.ids import derived_job_id, shard_of
from leasehold.core.jobs import Job
from leasehold.core.spec import JobSpec, resolve
from leasehold.core.states import TERMINAL, JobState
from leasehold.core.suspension import DurableMisuse, Sleep, Suspend
from leasehold.durable import records, runs
from leasehold.errors import Conflict, LeaseLost, NotFound, RateLimited
from leasehold.lifecycle import control, handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import (
    ADMISSION_SHARD,
    COUNTED,
    Submitted,
    new_job,
    through_intakes,
)
from leasehold.lifecycle.suspending import WAITING, wake
from leasehold.tenancy.admission import slot_admitted
from leasehold.tenancy.plans import limits_for

log = logging.getLogger(__name__)
#: On a child's row: its parent's id, and what happens to it when the parent ends.
PARENT = "parent_id"
ON_PARENT_END = "on_parent_end"
CANCEL, ABANDON = "cancel", "abandon"
#: On a child's row: the live-job slots it and its ancestors hold (the deadlock check).
CHAIN = "chain_slots"
#: On a parent's row: it spawned children (their records are in its partition).
HAS_CHILDREN = "has_children"
#: A child's record in its parent's partition of the coordination table.
CHILD = "child#"
#: The longest a parent sleeps between two looks at its children.
CHILD_POLL_SECONDS = 300
#: Children whose liveness a parent checks as it goes to sleep (a transaction holds 100
#: items: the job row, its companions, and these). Beyond, only the poll catches a race.
CHECKED_CHILDREN = 90
#: Children one job may spawn (its records are read back on every resume).
MAX_CHILDREN = 1_000
#: How long a spawn over its tenant's cap waits before it tries again, unless one of its
#: parent's children ends first (that gives a slot back, and wakes the parent at once).
ADMISSION_POLL_SECONDS = 5
#: What a parent waiting for a slot waits for (``waiting`` on its row).
ADMISSION = "admission"
#: Children the job view shows (the first, by call-site name).
CHILDREN_SHOWN = 100
#: Partitions of the coordination table holding the parents whose children must be
#: cancelled when they end (``sk`` = the parent's id): the outbox the sweeper reads.
OPEN = "durable-parents#"
OPEN_SHARDS = 4
_OPTIONS = {"pool", "priority", "delay_seconds", "max_attempts", "timeout_seconds", "retry",
            "labels", "unique", "debounce", "start_within_seconds", "concurrency",
            "throttle", "deadline_seconds", ON_PARENT_END}
#: Parents that spawned in this process: their worker's view of the row, from the lease,
#: does not show :data:`HAS_CHILDREN` yet when they end in the attempt that spawned.
_SPAWNED_HERE: set[str] = set()


class TooManyChildren(DurableMisuse):
    """A job spawns at most 1,000 children; split the work (children may spawn their own)."""


class CapTooSmall(DurableMisuse):
    """The tenant's live-job cap can never admit this child: its ancestors hold the slots."""


def child_id(parent: Job, site: str) -> str:
    return derived_job_id(parent.tenant, "child", parent.job_id, site)


def spawn_child(app: Leasehold, parent: Job, owner: str, stored: MutableMapping[str, Any],
                site: str, task: str, payload: Any, options: Mapping[str, Any],
                *, seq: int | None = None) -> str:
    """The id of the job that answers the spawn at call site ``site``. ``stored``: the
    parent's records as this attempt loaded them (the answer is added); ``seq``: the call's
    place in the parent's history (:mod:`.history`)."""
    sk = CHILD + site
    replacing: str | None = None
    if sk in stored:
        if not _earlier_run(parent, stored[sk]):
            return str(stored[sk]["job_id"])  # a replay: answered before
        if not _unfinished(app, stored[sk]):
            # It stands in this run: say so on its record, so later replays read no child.
            stored[sk] = records.update_fenced(
                app, parent, owner, sk, {runs.RECORD_RUN: runs.current(parent)},
                "(attribute_not_exists(#a0) OR #a0 < :a0)") or stored[sk]
            return str(stored[sk]["job_id"])
        replacing = str(stored[sk]["job_id"])  # a re-run by hand: its work is to do again
    options = dict(options)
    policy = options.pop(ON_PARENT_END, CANCEL)
    if policy not in (CANCEL, ABANDON):
        raise DurableMisuse(f"on_parent_end must be {CANCEL!r} or {ABANDON!r}, not {policy!r}")
    unknown = set(options) - _OPTIONS
    if unknown:
        raise DurableMisuse(f"ctx.spawn does not take {', '.join(sorted(unknown))}; it takes "
                            f"{', '.join(sorted(_OPTIONS))}")
    if sum(1 for key in stored if key.startswith(CHILD)) >= MAX_CHILDREN:
        raise TooManyChildren(f"a job spawns at most {MAX_CHILDREN} children; split the work "
                              "(children may spawn their own)")
    # The tenant's limits as its admission applies them (the deployment's settings, its
    # plan): a child takes a slot under the same cap its admitted parent did.
    limits = limits_for(app, parent.tenant)
    chain = slots_held(parent) + 1
    if limits.max_live is not None and chain > limits.max_live:
        raise CapTooSmall(
            f"tenant {parent.tenant!r} may have {limits.max_live} live jobs, and this child "
            f"would be the {chain}th of one chain of parents waiting for their children: it "
            "could never be admitted. Raise the cap, or spawn from a job that is not a child")
    now = app.now()
    spec = JobSpec(task=task, payload=payload, tenant=parent.tenant, **options)
    resolved = resolve(spec, app.registry, pools=app.settings.pools, now_ms=now,
                       timeout_limits=app.settings.job_timeout_limits())
    run = runs.current(parent)
    job_id = derived_job_id(parent.tenant, "child", parent.job_id, site, str(run)) if run else \
        child_id(parent, site)
    record = {"kind": "child", "name": site, "job_id": job_id, "task": task,
              ON_PARENT_END: policy, "at": now, runs.RECORD_RUN: run,
              **({} if seq is None else {"seq": seq})}
    fenced = [_record_put(app, parent, sk, record, replacing), _mark(app, parent, owner)]
    if policy == CANCEL:
        fenced.append(_open_put(app, parent))

    def write(slot: dict[str, Any], shard: int) -> Submitted:
        # shard -1: the tenant has no cap, and the child holds no slot (nor counts a chain).
        extra = {PARENT: parent.job_id, ON_PARENT_END: policy,
                 **({CHAIN: chain, COUNTED: True} if shard >= 0 else {COUNTED: False}),
                 **({ADMISSION_SHARD: shard} if shard > 0 else {})}
        row = new_job(app, resolved, now, job_id=job_id, actor="parent", extra=extra)

        def create(row: Job, writes: Sequence[Mapping[str, Any]]) -> Submitted:
            try:
                job, created = app.store.create(row, also=[*writes, *fenced])
            except Cancelled as cancelled:
                if cancelled.failed(len(writes) + 2):  # the parent's mark: its lease
                    raise LeaseLost(f"job {parent.job_id} is no longer this attempt's",
                                    job_id=parent.job_id) from None
                raise
            if created:  # also when our transaction's response was lost
                handoff.send(app.queues, job, now)
            return Submitted(job, created=created)

        return through_intakes(app, spec, create)(row, [{"Update": slot}] if slot else [])

    try:
        answer = slot_admitted(app, parent.tenant, limits, write)
    except RateLimited:
        # At the cap: wait for a slot (the attempt ends, the parent sleeps and tries again).
        raise Suspend(Sleep(wake_at=now + ADMISSION_POLL_SECONDS * 1000,
                            waiting=ADMISSION)) from None
    if answer.job.job_id == job_id:
        _SPAWNED_HERE.add(parent.job_id)
        stored[sk] = {"pk": records.partition(parent.job_id), "sk": sk, **record}
    elif replacing is not None:
        # A re-spawn answered by another job: the record of the earlier run names it now
        # (written once per run: the condition is on the record's run).
        stored[sk] = records.update_fenced(app, parent, owner, sk, {
            runs.RECORD_RUN: run, "job_id": answer.job.job_id, ON_PARENT_END: ABANDON,
            "own": False, "at": now}, "(attribute_not_exists(#a0) OR #a0 < :a0)") or \
            records.get(app, parent.job_id, sk) or {}
    else:
        # Another job answered (a unique key's live holder, a debounce window): not ours to
        # cancel, but what a replay of this call site must answer again.
        stored[sk] = records.put_fenced(app, parent, owner, sk, {
            **record, "job_id": answer.job.job_id, ON_PARENT_END: ABANDON, "own": False})
    return str(stored[sk]["job_id"])


def slots_held(job: Job) -> int:
    """The live-job slots ``job`` and its ancestors hold (when they all wait for their
    children, none of them gives its slot back)."""
    return int(job.extra.get(CHAIN) or (1 if job.extra.get(COUNTED) else 0))


def _earlier_run(parent: Job, record: Mapping[str, Any]) -> bool:
    """Whether the parent was re-run by hand (retry, redrive, bulk retry, a workflow's
    re-run step) since this call site's record was written."""
    return int(record.get(runs.RECORD_RUN) or 0) < runs.current(parent)


def _unfinished(app: Leasehold, record: Mapping[str, Any]) -> bool:
    """Whether the child of an earlier run's record ended without its work done (cancelled
    with the parent's first end, dead, expired): a re-run spawns it again. A child that
    succeeded, one still live, and another job that answered the spawn stand. One read,
    once per record and run."""
    if not record.get("own", True):
        return False
    try:
        child = app.store.get(str(record["job_id"]))
    except NotFound:
        return False  # deleted: nothing to run again from
    return child.state.terminal and child.state is not JobState.SUCCEEDED


def _record_put(app: Leasehold, parent: Job, sk: str, record: Mapping[str, Any],
                replacing: str | None = None) -> dict[str, Any]:
    """The record's put: once per call site, or over the record naming ``replacing`` (a
    re-spawn in a later run)."""
    item = {"pk": records.partition(parent.job_id), "sk": sk, **record}
    if replacing is None:
        return {"Put": {"TableName": app.settings.coordination_table, "Item": to_av(item),
                        "ConditionExpression": "attribute_not_exists(sk)"}}
    return {"Put": {"TableName": app.settings.coordination_table, "Item": to_av(item),
                    "ConditionExpression": "job_id = :replaced",
                    "ExpressionAttributeValues": to_av({":replaced": replacing})}}


def _mark(app: Leasehold, parent: Job, owner: str) -> dict[str, Any]:
    """The parent's row marked as having children, under this attempt's lease (the fence
    of every durable write: ``records.lease_check``)."""
    return {"Update": {
        "TableName": app.settings.jobs_table, "Key": job_key(parent.job_id),
        "UpdateExpression": "SET #has = :yes",
        "ConditionExpression": "#state = :running AND epoch = :epoch AND lease_owner = :owner",
        "ExpressionAttributeNames": {"#state": "state", "#has": HAS_CHILDREN},
        "ExpressionAttributeValues": to_av({":yes": True, ":running": JobState.RUNNING.value,
                                            ":epoch": parent.epoch, ":owner": owner})}}


def _open_key(parent_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"{OPEN}{shard_of(parent_id, OPEN_SHARDS)}"}, "sk": {"S": parent_id}}


def _open_put(app: Leasehold, parent: Job) -> dict[str, Any]:
    return {"Put": {"TableName": app.settings.coordination_table,
                    "Item": {**_open_key(parent.job_id), "tenant": {"S": parent.tenant}}}}


def wait_checks(app: Leasehold, live: Sequence[Job]) -> tuple[dict[str, Any], ...]:
    """Conditions the parent's move to SLEEPING carries: each child still unfinished."""
    values = to_av({f":t{i}": state.value for i, state in enumerate(sorted(TERMINAL))})
    return tuple({"ConditionCheck": {
        "TableName": app.settings.jobs_table, "Key": job_key(job.job_id),
        "ConditionExpression": f"NOT #state IN ({', '.join(values)})",
        "ExpressionAttributeNames": {"#state": "state"},
        "ExpressionAttributeValues": values}} for job in live[:CHECKED_CHILDREN])


def child_records(app: Leasehold, parent_id: str, limit: int | None = None
                  ) -> list[dict[str, Any]]:
    """The parent's child records, by call-site name (one Query, paged)."""
    return list(query(
        app.clients.dynamodb, limit=limit, TableName=app.settings.coordination_table,
        KeyConditionExpression="pk = :pk AND begins_with(sk, :child)", ConsistentRead=True,
        ExpressionAttributeValues=to_av({":pk": records.partition(parent_id),
                                         ":child": CHILD})))


def end_children(app: Leasehold, parent_id: str) -> int:
    """Cancel the live children of an ended parent spawned with ``on_parent_end="cancel"``
    (a RUNNING one by a cancel request), then close the parent's open item; how many were
    cancelled. Idempotent: the observer and the sweeper's repair may both run it."""
    ids = [str(r["job_id"]) for r in child_records(app, parent_id)
           if r.get(ON_PARENT_END, CANCEL) == CANCEL and r.get("own", True)]
    cancelled = 0
    for child in app.store.batch_get(ids):
        if child.state.live and child.extra.get(PARENT) == parent_id:
            try:
                control.cancel(app, child.job_id, actor="parent")
                cancelled += 1
            except (Conflict, NotFound):
                pass  # it finished meanwhile
    app.clients.dynamodb.delete_item(TableName=app.settings.coordination_table,
                                     Key=_open_key(parent_id))
    return cancelled


def repair(app: Leasehold, now: int) -> int:
    """The sweeper's pass: cancel the children of parents that ended while their open item
    stayed (the process that wrote the end died before it cancelled them). Reads the open
    items and their parents' rows: its cost grows with the parents that have cancellable
    children, never with the table."""
    repaired = 0
    for shard in range(OPEN_SHARDS):
        ids = [str(item["sk"]) for item in query(
            app.clients.dynamodb, TableName=app.settings.coordination_table,
            KeyConditionExpression="pk = :pk", ConsistentRead=True,
            ExpressionAttributeValues=to_av({":pk": f"{OPEN}{shard}"}))]
        found = {job.job_id: job for job in app.store.batch_get(ids)}
        for parent_id in ids:
            parent = found.get(parent_id)
            if parent is None or parent.state.terminal:
                end_children(app, parent_id)
                repaired += 1
    return repaired


def shown(app: Leasehold, job: Job, limit: int = CHILDREN_SHOWN
          ) -> tuple[list[dict[str, Any]], bool] | None:
    """The job's children as its page shows them (the first ``limit`` by call-site name,
    with their states), and whether there are more; None for a job that spawned none."""
    if not job.extra.get(HAS_CHILDREN):
        return None
    page = child_records(app, job.job_id, limit=limit + 1)
    found = {child.job_id: child for child in app.store.batch_get(
        [str(r["job_id"]) for r in page[:limit]]) if child.tenant == job.tenant}
    children = [{"name": r["name"], "job_id": r["job_id"], "task": r.get("task"),
                 "state": found[r["job_id"]].state.value if r["job_id"] in found else None,
                 ON_PARENT_END: r.get(ON_PARENT_END, CANCEL), "own": r.get("own", True)}
                for r in page[:limit]]
    return children, len(page) > limit


def observe(app: Leasehold) -> Any:
    """The store observer: a child's finish wakes its parent; a parent's end cancels its
    children."""

    def observer(job: Job, source: JobState | None) -> None:
        if source is None:
            return
        spawned_here = False
        if job.state is not JobState.RUNNING:
            spawned_here = job.job_id in _SPAWNED_HERE
            _SPAWNED_HERE.discard(job.job_id)
        if job.state.terminal and not source.terminal and \
                (spawned_here or job.extra.get(HAS_CHILDREN)):
            try:
                end_children(app, job.job_id)
            except Exception:
                log.warning("could not cancel the children of %s; the sweeper will",
                            job.job_id, exc_info=True)
        parent_id = job.extra.get(PARENT)
        if not parent_id or not job.state.terminal or source.terminal:
            return
        try:
            parent = app.store.get(str(parent_id))
            # A parent waiting for a slot is woken too: its child gave one back.
            if parent.state is JobState.SLEEPING and \
                    parent.extra.get(WAITING) in ("children", ADMISSION):
                wake(app, parent, actor="child", reason=f"child {job.job_id} {job.state}")
        except (Conflict, NotFound):
            pass  # woken by another child already, or gone

    return observer
