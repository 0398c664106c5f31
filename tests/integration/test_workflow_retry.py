"""A FAILED workflow resumes: its failed and cancelled steps and everything downstream run
again, succeeded steps keep their results, and the workflow is RUNNING, then done (issue 25).
Also: step results are in the workflow view, and a cancelled step's reason is its cancel."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.core.registry import TaskRegistry
from leasehold.core.retention import PURGE_AT
from leasehold.errors import NonRetryableError
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.workflows.progress import step_job_id
from leasehold.workflows.tree import render

from .api_client import ApiClient
from .workflow_helpers import run_until_idle

CHAIN = {"name": "chain", "steps": [
    {"id": "a", "task": "ok", "payload": 1},
    {"id": "b", "task": "flaky", "depends_on": ["a"]},
    {"id": "c", "task": "ok", "depends_on": ["b"]},
    {"id": "x", "task": "ok", "payload": 2},
]}


@pytest.fixture
def api(app: Leasehold, registry: TaskRegistry) -> ApiClient:
    runs: dict[str, int] = {}

    @registry.task("ok")
    def ok(payload: Any, ctx: Any) -> Any:
        runs[ctx.extra["step_id"]] = runs.get(ctx.extra["step_id"], 0) + 1
        return {"step": ctx.extra["step_id"], "payload": payload}

    @registry.task("flaky", max_attempts=1)
    def flaky(payload: Any, ctx: Any) -> Any:
        runs["b"] = runs.get("b", 0) + 1
        if runs["b"] == 1:
            raise NonRetryableError("the first run fails")
        return "fixed"

    client = ApiClient(app)
    client.runs = runs  # type: ignore[attr-defined]
    return client


def test_retry_reruns_failed_and_downstream_steps_and_the_workflow_runs_again(
        api: ApiClient) -> None:
    app = api.app
    wid = api.post("/workflows", CHAIN, tenant="t1").body["workflow_id"]
    run_until_idle(app)
    failed = api.get(f"/workflows/{wid}", tenant="t1").body
    assert failed["state"] == "FAILED"
    assert {s["id"]: s["state"] for s in failed["steps"]} == {
        "a": "SUCCEEDED", "b": "DEAD", "c": "CANCELLED", "x": "SUCCEEDED"}
    assert PURGE_AT in app.store.get(step_job_id(wid, "a", "t1")).extra  # settled: a TTL
    assert api.post(f"/workflows/{wid}/retry", tenant="t2").status == 404
    again = api.post(f"/workflows/{wid}/retry", tenant="t1")
    assert again.status == 200, again.body
    assert again.body["state"] == "RUNNING" and again.body["reason"] is None
    assert {s["id"]: s["state"] for s in again.body["steps"]} == {
        "a": "SUCCEEDED", "b": "QUEUED", "c": "WAITING", "x": "SUCCEEDED"}
    # A running workflow keeps every step: no TTL on any of them, nor on itself.
    assert all(PURGE_AT not in app.store.get(step_job_id(wid, s, "t1")).extra for s in "abcx")
    run_until_idle(app)
    done = api.get(f"/workflows/{wid}", tenant="t1").body
    assert done["state"] == "SUCCEEDED", done
    assert api.runs == {"a": 1, "b": 2, "c": 1, "x": 1}  # type: ignore[attr-defined]
    results = {s["id"]: s["result"] for s in done["steps"]}
    assert results == {"a": {"step": "a", "payload": 1}, "b": "fixed",
                       "c": {"step": "c", "payload": None}, "x": {"step": "x", "payload": 2}}
    assert '-> "fixed"' in render(done)  # `workflow status` shows results too
    assert api.post(f"/workflows/{wid}/retry", tenant="t1").status == 409  # it succeeded


def test_a_cancelled_steps_reason_is_its_cancel_not_an_old_error(
        app: Leasehold, registry: TaskRegistry) -> None:
    @registry.task("slow_to_fail")
    def slow_to_fail(payload: Any, ctx: Any) -> Any:
        raise RuntimeError("LeaseExpired-like failure of an earlier attempt")

    registry.task("ok")(lambda payload, ctx: payload)
    api = ApiClient(app)
    wid = api.post("/workflows", {"steps": [
        {"id": "a", "task": "slow_to_fail", "retry": {"min_backoff_seconds": 600,
                                                      "max_backoff_seconds": 600}},
        {"id": "b", "task": "ok", "depends_on": ["a"]}]}, tenant="t1").body["workflow_id"]
    run_until_idle(app)  # a failed once, waits for its retry with that error on its row
    a = app.store.get(step_job_id(wid, "a", "t1"))
    assert a.error is not None and a.state.live
    control.cancel(app, a.job_id, actor="oncall")
    shown = api.get(f"/workflows/{wid}", tenant="t1").body
    assert shown["state"] == "FAILED"
    assert "RuntimeError" not in shown["reason"] and "oncall" in shown["reason"], shown
