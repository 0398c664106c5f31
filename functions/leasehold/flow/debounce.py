"""Debounce: submissions with key K within S seconds of each other coalesce into one run,
with the latest payload, due S seconds after the last and never later than M after the first.

A window is a real job, QUEUED with its hand-off delayed to its fire time, and one pointer
item per key in the tenants table (``{tenant}#debounce#{K}`` holding the window's job id).

* Opening a window puts the job's row and moves the pointer to it in one transaction,
  conditioned on the pointer being absent or still naming the window the submitter saw
  end: of two racing openers one commits; the other reads the pointer again and joins.
* Joining a window is one fenced transition of its row (state QUEUED, same epoch): the new
  payload and, when the fire time moves, a new epoch and a new delayed hand-off (the old
  message becomes stale: the lease is fenced by the epoch). A lease that got there first
  fails the condition, and the submission opens the next window instead. So a window runs
  at most once, and a submission is carried by exactly the job its answer names.
* Once the fire time is capped by M, joining changes only the payload (no new epoch), so a
  steady stream of submissions cannot starve the lease past M.

The pointer is never given back: a pointer naming a job that is no longer a window (leased,
finished, re-run by hand, gone) is simply replaced by the next opener, so nothing can leak.
A window re-run by hand (retry, redrive, bulk retry) looks like an open one again (QUEUED,
no attempt, never started) while the pointer may still name it, so the re-run's own write
marks it :data:`RERUN` (the restart hook): a re-run runs the payload it was asked for, now,
and is never joined. A lost response on
either write is recognised as the caller's own (the store's write token, the transition's
history entry).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from leasehold.aws.dynamo import Cancelled, from_av, to_av
from leasehold.core import keyed
from leasehold.core.flowcontrol import DEBOUNCE_KEY, DEBOUNCE_WAIT_MS, START_BY
from leasehold.core.jobs import Job
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import Conflict, NotFound
from leasehold.flow.keys import item_key, option
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change
from leasehold.lifecycle.submission import Create, Submitted

ACTOR = "debounce"
#: On a window's row, beside its key and its wait per submission (DEBOUNCE_KEY and
#: DEBOUNCE_WAIT_MS, named in core.flowcontrol, which the job view reads): the latest it may
#: fire.
FIRE_BY = "debounce_fire_by"
#: On a window's row once it is re-run by hand: it is no window to join any more.
RERUN = "debounce_rerun"
#: Submissions that keep losing races (a window leased or opened under them) give up.
TRIES = 5


def options(app: Leasehold, spec: JobSpec, payload: Any) -> tuple[str, float, float] | None:
    """(key, seconds, max_wait_seconds) of the job's debounce, or None."""
    task = app.registry.get(spec.task)
    return keyed.debounce(option(spec.debounce, task.debounce), payload,
                          unique=option(spec.unique, task.unique),
                          idempotency_key=spec.idempotency_key, run_at=spec.run_at_ms,
                          delay_seconds=spec.delay_seconds)


def retry_key(app: Leasehold, spec: JobSpec, token: str | None) -> str | None:
    """The idempotency key of a submission that came with a client's retry token (the
    ``Idempotency-Key`` header, which ``leasehold.client`` sends unless given a key): the
    submission's own ``idempotency_key`` wins; else the token, unless the job is debounced.

    The token exists so that a submission sent again after a lost answer makes one job. A
    debounced submission is safe to send again without it: a repeat joins the window that
    carried the first (the same job answers). Only when that window was leased between the
    two does the repeat open the next one, so the task runs once more with that payload,
    as it would for any submission that came after the window started. (An explicit
    ``idempotency_key`` with ``debounce`` is still refused: the caller asked for an
    identity the window cannot give.)
    """
    if spec.idempotency_key is not None or token is None:
        return spec.idempotency_key
    debounced = spec.debounce is not None or (
        spec.task in app.registry and app.registry.get(spec.task).debounce is not None)
    return None if debounced else token


def intake(app: Leasehold, spec: JobSpec, job: Job, also: Sequence[Mapping[str, Any]],
           create: Create) -> Submitted:
    found = options(app, spec, job.payload)
    if found is None:
        return create(job, also)
    key, wait, longest = found
    name = item_key(job.tenant, "debounce", key)
    now = job.created_at
    for _ in range(TRIES):
        seen, window = _window(app, name, key)
        if window is not None:
            try:
                return Submitted(_join(app, window, job, now), created=False, coalesced=True)
            except Conflict:
                pass  # leased (or changed) since we read it: open the next window
        fire = now + int(wait * 1000)
        row = replace(job, run_at=fire,
                      lease_expires_at=handoff.handoff_deadline(fire, app.settings),
                      extra={**job.extra, DEBOUNCE_KEY: key, DEBOUNCE_WAIT_MS: int(wait * 1000),
                             FIRE_BY: now + int(longest * 1000)})
        pointer: dict[str, Any] = {
            "TableName": app.settings.tenants_table,
            "Item": to_av({"tenant": name, "job_id": row.job_id}),
            "ConditionExpression": "attribute_not_exists(tenant)"}
        if seen is not None:
            pointer["ConditionExpression"] = "job_id = :seen"
            pointer["ExpressionAttributeValues"] = to_av({":seen": seen})
        index = len(also) + 1
        try:
            return create(row, [*also, {"Put": pointer}])
        except Cancelled as cancelled:
            if not cancelled.failed(index):
                raise
            # Another submission opened a window first: join it.
    raise Conflict(f"debounce key {key!r} kept changing; try again")


def _pointer(app: Leasehold, name: str) -> str | None:
    raw = app.clients.dynamodb.get_item(
        TableName=app.settings.tenants_table, Key={"tenant": {"S": name}},
        ConsistentRead=True).get("Item")
    return None if raw is None else str(from_av(raw)["job_id"])


def _window(app: Leasehold, name: str, key: str) -> tuple[str | None, Job | None]:
    """The job the key's pointer names, and it again if it is an open window (QUEUED and
    never leased)."""
    holder = _pointer(app, name)
    if holder is None:
        return None, None
    try:
        job = app.store.get(holder)
    except NotFound:
        return holder, None
    if job.state is not JobState.QUEUED or job.attempt or job.first_started_at is not None \
            or job.extra.get(DEBOUNCE_KEY) != key or job.extra.get(RERUN):
        return holder, None
    return holder, job


def _join(app: Leasehold, window: Job, asked: Job, now: int) -> Job:
    """Carry ``asked``'s payload in ``window``, due ``seconds`` from now (capped)."""
    fire = max(now, min(now + int(window.extra[DEBOUNCE_WAIT_MS]), int(window.extra[FIRE_BY])))
    sets: dict[str, Any] = {"payload": asked.payload_json,
                            "lease_expires_at": window.lease_expires_at}
    if fire == window.run_at:  # capped: the message already sent is the one to run
        return app.store.transition(window, Change(
            target=JobState.QUEUED, actor=ACTOR, reason="debounced: payload replaced",
            set=sets), now=now)
    if window.extra.get(START_BY) is not None:  # a start window moves with the run
        # (the store bounds the hand-off deadline by it)
        sets[START_BY] = int(window.extra[START_BY]) - window.run_at + fire
    sets.update({"run_at": fire,
                 "lease_expires_at": handoff.handoff_deadline(fire, app.settings)})
    new = app.store.transition(window, Change(
        target=JobState.QUEUED, actor=ACTOR, reason="debounced: pushed out", set=sets,
        bump_epoch=True), now=now)
    handoff.send(app.queues, new, now)
    return new


def restart(app: Leasehold, job: Job, now: int) -> dict[str, Any]:
    """The restart hook: a window re-run by hand is closed for good (:data:`RERUN`)."""
    return {RERUN: True} if DEBOUNCE_KEY in job.extra else {}


def install(app: Leasehold) -> None:
    app.intakes.append(intake)
    app.restarts.append(restart)
