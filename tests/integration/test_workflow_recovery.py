"""Fixed interleavings: duplicate completions count once; a process dying mid-way stalls nothing.

moto's in-process backend is not thread-safe, so every race is written as the exact order of
operations that a real race would produce.
"""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.sweeper import sweep
from leasehold.workflows import WorkflowState, get_workflow, reconcile, start_workflow
from leasehold.workflows import progress as progress_module
from leasehold.workflows.progress import CHECK_SECONDS, step_finished, step_job_id
from leasehold.workflows.storage import DynamoWorkflowStore
from tests.integration.workflow_helpers import register_tasks, run_until_idle, spec, states

DIAMOND = [
    {"id": "a", "task": "ok"},
    {"id": "b", "task": "ok", "depends_on": ["a"]},
    {"id": "c", "task": "ok", "depends_on": ["a"]},
    {"id": "d", "task": "ok", "depends_on": ["b", "c"]},
]


@pytest.fixture
def calls(registry: TaskRegistry) -> list[tuple[str, dict[str, Any]]]:
    return register_tasks(registry)


def _row(app: Leasehold, workflow_id: str, step: str) -> Any:
    return app.store.get(step_job_id(workflow_id, step, "default"))


def test_a_dependency_reported_twice_is_counted_once(
        app: Leasehold, calls: list[tuple[str, dict[str, Any]]]) -> None:
    workflow_id = start_workflow(app, spec(DIAMOND)).workflow.workflow_id
    run_until_idle(app)  # the whole diamond, each finish reported once by the observer
    d = _row(app, workflow_id, "d")
    # Every step's outcome reported again, in order and twice (duplicate deliveries, a manual
    # re-run, a reconciler racing the observer): nothing moves.
    for _ in range(2):
        for step in ("a", "b", "c", "d"):
            step_finished(app, _row(app, workflow_id, step), app.now())
    again = _row(app, workflow_id, "d")
    assert again.extra["deps_pending"] == 0 and d.extra["deps_pending"] == 0
    assert again.epoch == d.epoch == 1  # released exactly once
    assert [step for step, _ in calls].count("d") == 1
    assert get_workflow(app, workflow_id).workflow.state is WorkflowState.SUCCEEDED


def test_a_duplicate_report_between_count_and_release_releases_once(
        app: Leasehold, calls: list[tuple[str, dict[str, Any]]]) -> None:
    workflow_id = start_workflow(app, spec(DIAMOND[:2])).workflow.workflow_id
    store = DynamoWorkflowStore(app.clients, app.settings)
    a_id = step_job_id(workflow_id, "a", "default")
    # "a" finishes; its observer counts it on "b" and dies before releasing "b".
    a = app.store.lease(a_id, 1, owner="w", expires_at=app.now() + 30_000, now=app.now(),
                        actor="w")
    app.store.observers.clear()
    from leasehold.lifecycle.store import Change
    a = app.store.transition(a, Change(target=JobState.SUCCEEDED, actor="w", owner="w",
                                       set={"result": "1", "finished_at": app.now()}),
                             now=app.now())
    assert store.count_dependency(step_job_id(workflow_id, "b", "default"), "a", "{}") == 0
    # A second counter (duplicate delivery) is refused, and does not go below zero.
    assert store.count_dependency(step_job_id(workflow_id, "b", "default"), "a", "{}") is None
    assert _row(app, workflow_id, "b").extra["deps_pending"] == 0
    # The duplicate report finds "b" counted but still WAITING, and releases it: once.
    step_finished(app, a, app.now())
    step_finished(app, a, app.now())
    b = _row(app, workflow_id, "b")
    assert b.state is JobState.QUEUED and b.epoch == 1


def test_the_reconciler_repropagates_a_step_whose_process_died_after_it_finished(
        app: Leasehold, clock: FakeClock, monkeypatch: pytest.MonkeyPatch,
        calls: list[tuple[str, dict[str, Any]]]) -> None:
    workflow_id = start_workflow(app, spec(DIAMOND)).workflow.workflow_id
    # The worker records "a" SUCCEEDED, then its process dies before the dependents are
    # counted: the observer (which the store calls after the write) never gets that far.
    def dies(*args: Any, **kwargs: Any) -> None:
        raise SystemExit("process died")

    with monkeypatch.context() as patch:
        patch.setattr(progress_module, "propagate", dies)
        with pytest.raises(SystemExit):  # the store's observers swallow errors, not exits
            run_until_idle(app)
    # Its message was never deleted; redelivered later it is stale (the row is SUCCEEDED),
    # so no delivery will ever pass "a" on again: only the reconciler can.
    assert _row(app, workflow_id, "a").state is JobState.SUCCEEDED
    assert states(app, workflow_id)["b"] == "WAITING"
    assert run_until_idle(app) == 0  # nothing left to deliver: without repair it would stall
    assert reconcile(app).examined == 0  # progress is recent: not looked at yet
    clock.advance(CHECK_SECONDS + 1)
    report = sweep(app)  # the sweeper runs the reconciler
    assert report.repaired["workflows"] == 1
    assert states(app, workflow_id)["b"] == "QUEUED"
    run_until_idle(app)
    assert get_workflow(app, workflow_id).workflow.state is WorkflowState.SUCCEEDED
    assert sorted(step for step, _ in calls) == ["a", "b", "c", "d"]


def test_the_reconciler_releases_the_roots_of_a_start_that_died_after_running(
        app: Leasehold, clock: FakeClock, monkeypatch: pytest.MonkeyPatch,
        calls: list[tuple[str, dict[str, Any]]]) -> None:
    from leasehold.workflows import start as start_module

    with monkeypatch.context() as patch:
        patch.setattr(start_module, "release_if_ready", lambda *a: False)  # died here
        workflow_id = start_workflow(app, spec(DIAMOND)).workflow.workflow_id
    assert states(app, workflow_id)["a"] == "WAITING"
    clock.advance(CHECK_SECONDS + 1)
    assert reconcile(app).released == 1
    run_until_idle(app)
    assert get_workflow(app, workflow_id).workflow.state is WorkflowState.SUCCEEDED


def test_an_interrupted_start_is_resumed_by_a_retry_or_failed_by_the_reconciler(
        app: Leasehold, clock: FakeClock, monkeypatch: pytest.MonkeyPatch,
        calls: list[tuple[str, dict[str, Any]]]) -> None:
    from leasehold.workflows import start as start_module

    created: list[str] = []
    real_create = app.store.create

    def create_two_then_die(job: Any) -> Any:
        if len(created) == 2:
            raise SystemExit("process died")
        created.append(job.job_id)
        return real_create(job)

    for key in ("resumed", "abandoned"):
        created.clear()
        with monkeypatch.context() as patch:
            patch.setattr(app.store, "create", create_two_then_die)
            with pytest.raises(SystemExit):
                start_workflow(app, spec(DIAMOND, idempotency_key=key))
    resumed = start_workflow(app, spec(DIAMOND, idempotency_key="resumed"))
    assert resumed.workflow.state is WorkflowState.RUNNING and not resumed.created
    clock.advance(start_module.CREATION_GRACE_SECONDS + 1)
    reconcile(app)
    run_until_idle(app)
    assert get_workflow(app, resumed.workflow.workflow_id).workflow.state is \
        WorkflowState.SUCCEEDED
    abandoned = start_module.workflow_id_for(spec(DIAMOND, idempotency_key="abandoned"), 0)
    detail = get_workflow(app, abandoned)
    assert detail.workflow.state is WorkflowState.FAILED
    assert "interrupted" in detail.workflow.reason
    assert {job.state for job in detail.steps} == {JobState.CANCELLED}  # the two written
    assert detail.workflow.settled
    assert sorted(step for step, _ in calls) == ["a", "b", "c", "d"]  # only the resumed ran


def test_a_failed_workflow_whose_cancels_were_cut_short_is_wound_down_by_the_reconciler(
        app: Leasehold, clock: FakeClock, monkeypatch: pytest.MonkeyPatch,
        calls: list[tuple[str, dict[str, Any]]]) -> None:
    steps = [{"id": "bad", "task": "boom"}, {"id": "next", "task": "ok", "depends_on": ["bad"]},
             {"id": "other", "task": "ok", "depends_on": ["next"]}]
    with monkeypatch.context() as patch:
        patch.setattr(progress_module, "wind_down", lambda *a: False)  # died before cancels
        workflow_id = start_workflow(app, spec(steps)).workflow.workflow_id
        run_until_idle(app)
    assert get_workflow(app, workflow_id).workflow.state is WorkflowState.FAILED
    assert states(app, workflow_id)["next"] == "WAITING"
    clock.advance(1)
    report = reconcile(app)
    assert report.closed == 1
    assert states(app, workflow_id) == {"bad": "DEAD", "next": "CANCELLED",
                                        "other": "CANCELLED"}
    assert get_workflow(app, workflow_id).workflow.settled
