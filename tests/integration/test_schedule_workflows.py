"""Schedules that start a whole workflow (issue 6), in moto with an injected clock.

The ticker is driven by hand and the worker by ``deliver``, so every interleaving is fixed.
A workflow schedule fires when due (never ahead), with a run id derived from the schedule,
its configuration and the fire time.
"""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.errors import ValidationError
from leasehold.lifecycle.app import Leasehold
from leasehold.time import schedules
from leasehold.time.ticker import TickReport, fire_schedule, tick
from leasehold.workflows import (
    Workflow,
    WorkflowDetail,
    WorkflowState,
    get_workflow,
    list_workflows,
)
from tests.integration.helpers import deliver
from tests.integration.workflow_helpers import DIAMOND, register_tasks, states

M = 60_000

@pytest.fixture
def calls(registry: TaskRegistry) -> list[tuple[str, dict[str, Any]]]:
    return register_tasks(registry)


def make(app: Leasehold, steps: list[dict[str, Any]] | None = None,
         **body: Any) -> schedules.Schedule:
    workflow = {"name": "nightly", "steps": steps or DIAMOND}
    return schedules.create(app, {"cron": "* * * * *", "workflow": workflow, **body},
                            tenant="acme")


def runs(app: Leasehold) -> list[Workflow]:
    """The tenant's workflows, oldest first."""
    found, _ = list_workflows(app, "acme", limit=200)
    return sorted(found, key=lambda w: w.origin.get("scheduled_for", ""))


def drain(app: Leasehold) -> None:
    while deliver(app):
        pass


def test_a_workflow_schedule_starts_a_diamond_when_due_and_it_completes(
        app: Leasehold, clock: FakeClock, calls: list[tuple[str, dict[str, Any]]]) -> None:
    schedule = make(app)  # created at 00:00:00
    assert schedule.next_fire_at == clock.now_ms() + M
    clock.advance(30)
    # Due within the lookahead, but a workflow is never started ahead of its time.
    assert tick(app).fired == 0 and runs(app) == []
    clock.advance(30)
    report = tick(app)
    [run] = runs(app)
    assert report.fired == 1 and report.fired_job_ids == [run.workflow_id]
    assert run.created_at == schedule.next_fire_at and run.name == "nightly"
    assert dict(run.origin) == {"schedule_id": schedule.schedule_id,
                                "scheduled_for": "2026-01-01T00:01:00.000Z"}
    assert states(app, run.workflow_id) == {
        "a": "QUEUED", "b": "WAITING", "c": "WAITING", "d": "WAITING"}
    drain(app)
    assert get_workflow(app, run.workflow_id).workflow.state is WorkflowState.SUCCEEDED
    order = [step for step, _ in calls]
    assert sorted(order) == ["a", "b", "c", "d"] and order[0] == "a" and order[-1] == "d"
    stored = schedules.get(app, schedule.schedule_id)
    assert (stored.run_count, stored.last_job_id, stored.next_fire_at) == (
        1, run.workflow_id, schedule.next_fire_at + M)
    assert stored.view()["last_workflow_id"] == run.workflow_id


def test_a_double_tick_and_concurrent_ticks_start_one_workflow(
        app: Leasehold, clock: FakeClock, calls: list[tuple[str, dict[str, Any]]]) -> None:
    schedule = make(app)
    clock.advance(60)
    store = schedules.store_for(app)
    snapshot = store.get(schedule.schedule_id)
    a, b = TickReport(), TickReport()
    # Both read the schedule before either wrote it; A finishes first, then B.
    fire_schedule(app, store, snapshot, app.now(), 90_000, a)
    fire_schedule(app, store, snapshot, app.now(), 90_000, b)
    assert (a.fired, b.fired) == (1, 0)
    assert tick(app).fired == 0  # and a third, ordinary tick
    [run] = runs(app)
    drain(app)
    assert len(calls) == 4  # each step ran once
    assert get_workflow(app, run.workflow_id).workflow.state is WorkflowState.SUCCEEDED
    assert store.get(schedule.schedule_id).run_count == 1


def test_overlap_forbid_skips_while_the_previous_workflow_is_live(
        app: Leasehold, clock: FakeClock, calls: list[tuple[str, dict[str, Any]]]) -> None:
    schedule = make(app, overlap_policy="forbid")
    clock.advance(60)
    tick(app)
    [first] = runs(app)
    clock.advance(60)  # 00:02: the first run has not run a step yet
    report = tick(app)
    assert (report.fired, report.misfired) == (0, 1) and len(runs(app)) == 1
    drain(app)
    assert get_workflow(app, first.workflow_id).workflow.state is WorkflowState.SUCCEEDED
    clock.advance(60)  # 00:03: the previous run finished, so this one starts
    assert tick(app).fired == 1
    assert [r.origin["scheduled_for"] for r in runs(app)] == [
        "2026-01-01T00:01:00.000Z", "2026-01-01T00:03:00.000Z"]
    assert schedules.get(app, schedule.schedule_id).skipped_count == 1


def test_overlap_replace_cancels_the_previous_workflow_and_its_steps(
        app: Leasehold, clock: FakeClock, calls: list[tuple[str, dict[str, Any]]]) -> None:
    make(app, overlap_policy="replace")
    clock.advance(60)
    tick(app)
    clock.advance(60)
    assert tick(app).fired == 1
    first, second = runs(app)
    old = get_workflow(app, first.workflow_id)
    assert old.workflow.state is WorkflowState.CANCELLED
    assert "replaced by scheduler" in old.workflow.reason
    assert {s.state.value for s in old.steps} == {"CANCELLED"}
    drain(app)
    assert get_workflow(app, second.workflow_id).workflow.state is WorkflowState.SUCCEEDED
    assert len(calls) == 4  # only the second run's steps ran


def test_a_two_hour_outage_follows_the_misfire_policy(
        app: Leasehold, clock: FakeClock, calls: list[tuple[str, dict[str, Any]]]) -> None:
    expected = {"skip": [], "fire_once": ["02:00"], "catch_up": ["01:58", "01:59", "02:00"]}
    ids = {make(app, misfire_policy=policy, max_catch_up=3,
                starting_deadline_seconds=30).schedule_id: policy for policy in expected}
    clock.advance(2 * 3600 + 45)  # 02:00:45: everything since 00:01 is past the deadline
    tick(app)
    fired: dict[str, list[str]] = {policy: [] for policy in expected}
    for run in runs(app):
        fired[ids[run.origin["schedule_id"]]].append(run.origin["scheduled_for"][11:16])
    assert fired == expected


def test_trigger_starts_the_workflow_now_under_its_overlap_policy(
        app: Leasehold, clock: FakeClock, calls: list[tuple[str, dict[str, Any]]]) -> None:
    schedule = make(app, overlap_policy="replace")
    first = schedules.trigger(app, schedule.schedule_id, "acme")
    second = schedules.trigger(app, schedule.schedule_id, "acme")
    assert isinstance(first, WorkflowDetail) and isinstance(second, WorkflowDetail)
    assert first.workflow.state is WorkflowState.RUNNING  # as the trigger returned it
    assert get_workflow(app, first.workflow.workflow_id).workflow.state is \
        WorkflowState.CANCELLED
    assert second.workflow.origin["schedule_id"] == schedule.schedule_id


def test_the_stored_workflow_keeps_its_resolved_steps_and_an_update_replaces_them(
        app: Leasehold, clock: FakeClock, registry: TaskRegistry,
        calls: list[tuple[str, dict[str, Any]]]) -> None:
    registry.task("slow", priority="low", max_attempts=2, timeout_seconds=60)(
        lambda payload, ctx: payload)
    schedule = make(app, [{"id": "only", "task": "slow", "payload": {"k": [1, 2]},
                           "retry": {"min_backoff_seconds": 1.5}}])
    [step] = schedules.get(app, schedule.schedule_id).view()["workflow"]["steps"]
    assert {k: step[k] for k in ("id", "task", "payload", "priority", "max_attempts",
                                 "timeout_seconds", "pool", "depends_on")} == {
        "id": "only", "task": "slow", "payload": {"k": [1, 2]}, "priority": "low",
        "max_attempts": 2, "timeout_seconds": 60.0, "pool": "default", "depends_on": []}
    assert step["retry"]["min_backoff_seconds"] == 1.5
    with pytest.raises(ValidationError) as raised:
        schedules.update(app, schedule.schedule_id, {"payload": {"x": 1}}, "acme")
    assert raised.value.field == "payload"
    updated = schedules.update(app, schedule.schedule_id, {"workflow": {"steps": DIAMOND}},
                               "acme")
    assert [s["id"] for s in updated.view()["workflow"]["steps"]] == ["a", "b", "c", "d"]
    clock.advance(60)
    tick(app)
    drain(app)
    assert [r.step_count for r in runs(app)] == [4] and len(calls) == 4
    # Back to a single job: the workflow is dropped.
    job = schedules.update(app, schedule.schedule_id, {"task": "ok"}, "acme")
    assert job.workflow is None and job.view()["task"] == "ok"


INVALID = [
    ({"workflow": {"steps": [{"id": "a", "task": "ok", "depends_on": ["b"]},
                             {"id": "b", "task": "ok", "depends_on": ["a"]}]}},
     "workflow.steps[0].depends_on", "cycle: a -> b -> a"),
    ({"workflow": {"steps": [{"id": "a", "task": "ok", "depends_on": ["zzz"]}]}},
     "workflow.steps[0].depends_on", "zzz"),
    ({"workflow": {"steps": [{"id": "a", "task": "nope"}]}}, "workflow.steps[0].task",
     "unknown task 'nope'"),
    ({"workflow": {"steps": []}}, "workflow.steps", "at least one step"),
    ({"workflow": {"steps": [{"id": "a", "task": "ok", "payload": "x" * 140_000}]}},
     "workflow.steps[0].payload", "limit"),
    # Each step is small enough, but all of them would not fit in the schedule's item.
    ({"workflow": {"steps": [{"id": f"s{i}", "task": "ok", "payload": "x" * 100_000}
                             for i in range(4)]}}, "workflow", "limit is 307200"),
    ({"workflow": {"steps": DIAMOND, "idempotency_key": "k"}}, "workflow.idempotency_key",
     "own id"),
    ({"workflow": {"steps": DIAMOND}, "task": "ok"}, "workflow", "not both (got task)"),
    ({"workflow": {"steps": DIAMOND}, "payload": 1}, "workflow", "not both (got payload)"),
    ({"workflow": {"steps": DIAMOND}, "jitter_seconds": 5}, "jitter_seconds", "leave"),
    ({"workflow": [1]}, "workflow", "must be an object"),
    ({}, "task", "give task (a job), target (a job with no code) or workflow"),
]


def test_an_invalid_workflow_schedule_is_refused_naming_the_field_with_nothing_written(
        app: Leasehold, calls: list[tuple[str, dict[str, Any]]]) -> None:
    # One app for every case (tables cost a second each in moto); each case names itself.
    for body, field, message in INVALID:
        with pytest.raises(ValidationError) as raised:
            schedules.create(app, {"cron": "* * * * *", **body}, tenant="acme")
        assert (raised.value.field, message in str(raised.value)) == (field, True), \
            (body, str(raised.value))
    assert schedules.list_schedules(app, "acme") == ([], None)
