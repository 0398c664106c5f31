"""Retention: only terminal rows carry a DynamoDB TTL; nothing live is ever expired.

The every-transition test walks the one table of allowed transitions (core/states.py) through
the store's one transition primitive against moto, and reads the raw row after each step.
"""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import from_av
from leasehold.core.jobs import Job
from leasehold.core.registry import TaskRegistry
from leasehold.core.retention import DAY_SECONDS, PURGE_AT
from leasehold.core.spec import JobSpec, resolve
from leasehold.core.states import TRANSITIONS, JobState
from leasehold.errors import ValidationError
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change
from leasehold.lifecycle.submission import new_job, submit
from leasehold.workflows import WorkflowState, get_workflow, start_workflow
from leasehold.workflows.progress import step_job_id, workflow_store
from tests.conftest import MakeApp
from tests.integration.workflow_helpers import DIAMOND, register_tasks, run_until_idle, spec

S = JobState


def raw(app: Leasehold, job_id: str) -> dict[str, Any]:
    response = app.clients.dynamodb.get_item(TableName=app.settings.jobs_table,
                                             Key=job_key(job_id))
    return from_av(response["Item"])


def created(app: Leasehold, state: JobState, **spec_fields: Any) -> Job:
    now = app.now()
    resolved = resolve(JobSpec(task="echo", **spec_fields), app.registry,
                       pools=app.settings.pools, now_ms=now)
    job, _ = app.store.create(new_job(app, resolved, now, state=state))
    return job


def enter(app: Leasehold, job: Job, target: JobState) -> Job:
    """Move ``job`` to ``target`` by the one primitive (or the lease, for QUEUED -> RUNNING)."""
    now = app.now()
    if target is S.RUNNING:
        return app.store.lease(job.job_id, job.epoch, owner="w", expires_at=now + 30_000,
                               now=now, actor="w")
    sets: dict[str, Any] = {}
    if target is S.QUEUED:
        sets["lease_expires_at"] = now + 60_000
    if target.terminal:
        sets["finished_at"] = now
    return app.store.transition(job, Change(target=target, actor="test", set=sets,
                                            bump_epoch=target is S.QUEUED), now=now)


#: How to reach each state from a new row (every path uses allowed transitions only).
PATHS: dict[JobState, tuple[JobState, tuple[JobState, ...]]] = {
    S.SCHEDULED: (S.SCHEDULED, ()), S.WAITING: (S.WAITING, ()), S.QUEUED: (S.QUEUED, ()),
    S.RUNNING: (S.QUEUED, (S.RUNNING,)), S.SUCCEEDED: (S.QUEUED, (S.RUNNING, S.SUCCEEDED)),
    S.DEAD: (S.QUEUED, (S.RUNNING, S.DEAD)), S.CANCELLED: (S.QUEUED, (S.CANCELLED,)),
    S.EXPIRED: (S.QUEUED, (S.EXPIRED,)), S.SLEEPING: (S.QUEUED, (S.RUNNING, S.SLEEPING)),
}


@pytest.fixture
def echo(registry: TaskRegistry) -> None:
    registry.task("echo")(lambda payload, ctx: payload)


def test_only_a_terminal_row_carries_a_ttl_on_every_allowed_transition(
        app: Leasehold, echo: None) -> None:
    # One app for the whole table (a fresh one per pair would cost 15 table sets).
    for source, target in sorted(TRANSITIONS):
        first, path = PATHS[source]
        job = created(app, first)
        for state in path:
            job = enter(app, job, state)
        # Every state on the way: a TTL if and only if terminal (the row as DynamoDB has it).
        assert (PURGE_AT in raw(app, job.job_id)) is source.terminal, (source, target)
        app.clock.advance(3600)
        job = enter(app, job, target)
        row = raw(app, job.job_id)
        assert job.state is target
        if target.terminal:
            assert row[PURGE_AT] == app.now() // 1000 + 30 * DAY_SECONDS, (source, target)
            assert job.view()["retained_until"] is not None
        else:  # live: never a TTL, even straight after one (a retry of a finished job)
            assert PURGE_AT not in row, (source, target)
            assert job.view()["retained_until"] is None


def test_every_state_is_covered_by_the_walk() -> None:
    assert set(PATHS) == set(JobState)
    assert {s for pair in TRANSITIONS for s in pair} == set(JobState)


def test_a_job_asks_for_its_own_retention_and_zero_keeps_it_forever(
        make_app: MakeApp, echo: None) -> None:
    app = make_app(retention_days=7)
    mine = enter(app, enter(app, created(app, S.QUEUED, retention_days=90), S.RUNNING),
                 S.SUCCEEDED)
    stack = enter(app, enter(app, created(app, S.QUEUED), S.RUNNING), S.DEAD)
    forever = enter(app, created(app, S.QUEUED, retention_days=0), S.CANCELLED)
    now_s = app.now() // 1000
    assert raw(app, mine.job_id)[PURGE_AT] == now_s + 90 * DAY_SECONDS
    assert mine.view()["retention_days"] == 90
    assert raw(app, stack.job_id)[PURGE_AT] == now_s + 7 * DAY_SECONDS
    assert PURGE_AT not in raw(app, forever.job_id)
    with pytest.raises(ValidationError, match="retention_days"):
        created(app, S.QUEUED, retention_days=-1)


def test_a_retried_job_loses_its_ttl(app: Leasehold, registry: TaskRegistry
                                                     ) -> None:
    registry.task("echo")(lambda payload, ctx: payload)
    job = submit(app, JobSpec(task="echo")).job
    control.cancel(app, job.job_id)
    assert PURGE_AT in raw(app, job.job_id)
    again = control.retry(app, job.job_id)
    assert again.state is S.QUEUED and PURGE_AT not in raw(app, job.job_id)
    assert again.view()["retained_until"] is None


def test_a_finished_workflow_and_its_steps_get_one_ttl_only_once_settled(
        app: Leasehold, registry: TaskRegistry) -> None:
    register_tasks(registry)
    started = start_workflow(app, spec(DIAMOND))
    workflow_id = started.workflow.workflow_id
    app.clock.advance(60)
    run_until_idle(app)
    assert get_workflow(app, workflow_id).workflow.state is WorkflowState.SUCCEEDED
    stored = app.clients.dynamodb.get_item(TableName=app.settings.workflows_table,
                                           Key={"workflow_id": {"S": workflow_id}})["Item"]
    purge = from_av(stored)[PURGE_AT]
    assert purge == app.now() // 1000 + 30 * DAY_SECONDS
    for step in ("a", "b", "c", "d"):
        # The step's own finish gave it none (its workflow was running); the settle did.
        assert raw(app, step_job_id(workflow_id, step, "default"))[PURGE_AT] == purge
    assert workflow_store(app).get(workflow_id).settled


def test_a_step_of_a_running_workflow_keeps_no_ttl(app: Leasehold, registry: TaskRegistry
                                                   ) -> None:
    register_tasks(registry)
    started = start_workflow(app, spec(DIAMOND[:2]))
    workflow_id = started.workflow.workflow_id
    a = app.store.get(step_job_id(workflow_id, "a", "default"))
    a = enter(app, enter(app, a, S.RUNNING), S.SUCCEEDED)  # b is released, not yet run
    assert app.store.get(step_job_id(workflow_id, "b", "default")).state is S.QUEUED
    assert PURGE_AT not in raw(app, a.job_id)
