"""Workflows driven through the library in moto: shapes, inputs, failure policies, cancel."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.core.registry import TaskRegistry
from leasehold.errors import Conflict, IdempotencyConflict, ValidationError
from leasehold.lifecycle.app import Leasehold
from leasehold.workflows import (
    WorkflowState,
    cancel_workflow,
    get_workflow,
    list_workflows,
    reconcile,
    start_workflow,
)
from leasehold.workflows.progress import CHECK_SECONDS, step_job_id, workflow_store
from tests.integration.workflow_helpers import DIAMOND, register_tasks, run_until_idle, spec, states


@pytest.fixture
def calls(registry: TaskRegistry) -> list[tuple[str, dict[str, Any]]]:
    return register_tasks(registry)


@pytest.mark.ddblocal
def test_a_diamond_runs_each_step_once_after_its_dependencies(
        app: Leasehold, calls: list[tuple[str, dict[str, Any]]]) -> None:
    started = start_workflow(app, spec(DIAMOND, name="diamond"))
    assert started.created and started.workflow.state is WorkflowState.RUNNING
    assert states(app, started.workflow.workflow_id) == {
        "a": "QUEUED", "b": "WAITING", "c": "WAITING", "d": "WAITING"}
    run_until_idle(app)
    order = [step for step, _ in calls]
    assert sorted(order) == ["a", "b", "c", "d"]
    assert order[0] == "a" and order[-1] == "d"
    detail = get_workflow(app, started.workflow.workflow_id)
    assert detail.workflow.state is WorkflowState.SUCCEEDED
    assert detail.workflow.settled
    d_inputs = dict(calls)["d"]
    assert d_inputs["b"]["result"] == {"step": "b", "payload": None}
    assert d_inputs["c"]["state"] == "SUCCEEDED"
    assert dict(calls)["b"] == {"a": {"state": "SUCCEEDED", "job_id": step_job_id(
        started.workflow.workflow_id, "a", "default"), "result": {"step": "a", "payload": 1}}}


def test_a_hundred_wide_fan_out_fans_in_with_every_result(
        app: Leasehold, calls: list[tuple[str, dict[str, Any]]]) -> None:
    width = 100
    steps = [{"id": "split", "task": "ok"}]
    steps += [{"id": f"part-{i}", "task": "ok", "payload": i, "depends_on": ["split"]}
              for i in range(width)]
    steps += [{"id": "join", "task": "ok", "depends_on": [f"part-{i}" for i in range(width)]}]
    started = start_workflow(app, spec(steps))
    run_until_idle(app)
    assert get_workflow(app, started.workflow.workflow_id).workflow.state is \
        WorkflowState.SUCCEEDED
    ran = [step for step, _ in calls]
    assert len(ran) == width + 2 and ran[-1] == "join" and len(set(ran)) == width + 2
    joined = dict(calls)["join"]
    assert {v["result"]["payload"] for v in joined.values()} == set(range(width))


def test_a_result_larger_than_its_share_is_passed_as_a_marker(
        app: Leasehold, registry: TaskRegistry) -> None:
    seen: list[Any] = []

    @registry.task("big")
    def big(payload: Any, ctx: Any) -> Any:
        return "x" * 60_000

    @registry.task("look")
    def look(payload: Any, ctx: Any) -> Any:
        from leasehold.workflows import step_inputs
        seen.append(step_inputs(ctx))

    start_workflow(app, spec([
        {"id": "small", "task": "look"}, {"id": "large", "task": "big"},
        {"id": "end", "task": "look", "depends_on": ["small", "large"]}]))
    run_until_idle(app)
    inputs = seen[-1]
    assert inputs["small"]["result"] is None
    assert inputs["large"]["truncated"] is True and "result" not in inputs["large"]
    assert inputs["large"]["result_bytes"] == 60_002


@pytest.mark.ddblocal
def test_fail_workflow_cancels_the_rest(
        app: Leasehold, calls: list[tuple[str, dict[str, Any]]]) -> None:
    started = start_workflow(app, spec([
        {"id": "a", "task": "ok"}, {"id": "bad", "task": "boom", "depends_on": ["a"]},
        {"id": "side", "task": "ok", "depends_on": ["a"]},
        {"id": "after", "task": "ok", "depends_on": ["bad", "side"]}]))
    run_until_idle(app)
    detail = get_workflow(app, started.workflow.workflow_id)
    assert detail.workflow.state is WorkflowState.FAILED
    assert "step 'bad' ended DEAD" in detail.workflow.reason
    assert "after" not in [step for step, _ in calls]
    assert states(app, started.workflow.workflow_id)["after"] == "CANCELLED"
    assert detail.workflow.settled


def test_continue_runs_dependents_with_the_failure_and_fails_the_workflow(
        app: Leasehold, calls: list[tuple[str, dict[str, Any]]]) -> None:
    started = start_workflow(app, spec([
        {"id": "bad", "task": "boom", "failure_policy": "continue"},
        {"id": "after", "task": "ok", "depends_on": ["bad"]}]))
    run_until_idle(app)
    seen = dict(calls)["after"]["bad"]
    assert seen["state"] == "DEAD" and seen["result"] is None
    assert seen["error"]["type"] == "NonRetryableError"
    workflow = get_workflow(app, started.workflow.workflow_id).workflow
    assert workflow.state is WorkflowState.FAILED
    assert workflow.reason == "failed steps: bad"


def test_ignore_runs_dependents_and_the_workflow_can_succeed(
        app: Leasehold, calls: list[tuple[str, dict[str, Any]]]) -> None:
    started = start_workflow(app, spec([
        {"id": "bad", "task": "boom", "failure_policy": "ignore"},
        {"id": "after", "task": "ok", "depends_on": ["bad"]}]))
    run_until_idle(app)
    assert dict(calls)["after"]["bad"]["state"] == "DEAD"
    assert get_workflow(app, started.workflow.workflow_id).workflow.state is \
        WorkflowState.SUCCEEDED


def test_cancel_mid_run_cancels_waiting_steps_and_stops_the_running_one(
        app: Leasehold, registry: TaskRegistry, clock: Any,
        calls: list[tuple[str, dict[str, Any]]]) -> None:
    cancelled: list[WorkflowState] = []

    @registry.task("cancels-its-workflow")
    def cancels(payload: Any, ctx: Any) -> Any:
        # The API cancels the workflow while this step runs (a fixed interleaving).
        detail = cancel_workflow(app, ctx.extra["workflow_id"], actor="tester")
        cancelled.append(detail.workflow.state)
        return "finished anyway"

    steps = [{"id": "a", "task": "cancels-its-workflow"}, *DIAMOND[1:]]
    workflow_id = start_workflow(app, spec(steps)).workflow.workflow_id
    run_until_idle(app)
    assert cancelled == [WorkflowState.CANCELLED]
    assert states(app, workflow_id) == {"a": "CANCELLED", "b": "CANCELLED", "c": "CANCELLED",
                                        "d": "CANCELLED"}
    assert calls == []  # no dependent ran
    workflow = get_workflow(app, workflow_id).workflow
    assert workflow.reason == "cancelled by tester"
    assert not workflow.settled  # "a" was live when it was cancelled: the reconciler settles
    clock.advance(CHECK_SECONDS + 1)
    report = reconcile(app)
    assert report.closed == 1
    assert get_workflow(app, workflow_id).workflow.settled


def test_a_finished_workflow_cannot_be_cancelled(
        app: Leasehold, calls: list[tuple[str, dict[str, Any]]]) -> None:
    workflow_id = start_workflow(app, spec(DIAMOND[:1])).workflow.workflow_id
    run_until_idle(app)
    with pytest.raises(Conflict, match="already finished"):
        cancel_workflow(app, workflow_id)


def test_an_invalid_graph_is_rejected_with_nothing_written(
        app: Leasehold, calls: list[tuple[str, dict[str, Any]]]) -> None:
    bad = spec([{"id": "a", "task": "ok", "depends_on": ["b"]},
                {"id": "b", "task": "ok", "depends_on": ["a"]}], idempotency_key="k1")
    with pytest.raises(ValidationError, match="cycle: a -> b -> a"):
        start_workflow(app, bad)
    unknown_task = spec([{"id": "a", "task": "ok"}, {"id": "b", "task": "nope"}])
    with pytest.raises(ValidationError, match="step 'b': unknown task"):
        start_workflow(app, unknown_task)
    table = app.clients.dynamodb
    assert table.scan(TableName=app.settings.workflows_table)["Count"] == 0
    assert table.scan(TableName=app.settings.jobs_table)["Count"] == 0


@pytest.mark.ddblocal
def test_a_replayed_start_finds_the_first_and_a_changed_spec_conflicts(
        app: Leasehold, calls: list[tuple[str, dict[str, Any]]]) -> None:
    first = start_workflow(app, spec(DIAMOND, idempotency_key="nightly"))
    again = start_workflow(app, spec(DIAMOND, idempotency_key="nightly"))
    assert not again.created
    assert again.workflow.workflow_id == first.workflow.workflow_id
    with pytest.raises(IdempotencyConflict):
        start_workflow(app, spec(DIAMOND[:1], idempotency_key="nightly"))
    run_until_idle(app)
    assert len(calls) == 4


def test_listing_shows_a_tenants_workflows_newest_first(
        app: Leasehold, clock: Any, calls: list[tuple[str, dict[str, Any]]]) -> None:
    one = start_workflow(app, spec(DIAMOND, tenant="t1")).workflow.workflow_id
    clock.advance(1)
    two = start_workflow(app, spec(DIAMOND, tenant="t1")).workflow.workflow_id
    start_workflow(app, spec(DIAMOND, tenant="t2"))
    page, _ = list_workflows(app, "t1")
    assert [w.workflow_id for w in page] == [two, one]
    with pytest.raises(Exception, match="no workflow"):
        get_workflow(app, one, tenant="t2")
    assert workflow_store(app).get(one).tenant == "t1"
