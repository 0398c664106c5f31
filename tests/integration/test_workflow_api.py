"""The workflow routes, driven with API Gateway proxy events over moto."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold

from .api_client import ApiClient
from .workflow_helpers import register_tasks, run_until_idle

DIAMOND = {"name": "diamond", "steps": [
    {"id": "a", "task": "ok", "payload": {"n": 1}},
    {"id": "b", "task": "ok", "depends_on": ["a"], "failure_policy": "continue"},
    {"id": "c", "task": "ok", "depends_on": ["a"], "retry": {"min_backoff_seconds": 2}},
    {"id": "d", "task": "ok", "depends_on": ["b", "c"], "timeout_seconds": 30},
]}


@pytest.fixture
def api(app: Leasehold, registry: TaskRegistry) -> ApiClient:
    register_tasks(registry)
    return ApiClient(app)


def test_a_started_workflow_shows_its_graph_and_finishes(api: ApiClient) -> None:
    created = api.post("/workflows", DIAMOND, tenant="t1")
    assert created.status == 201, created.body
    body = created.body
    assert body["state"] == "RUNNING" and body["step_count"] == 4
    assert {s["id"]: s["state"] for s in body["steps"]} == {
        "a": "QUEUED", "b": "WAITING", "c": "WAITING", "d": "WAITING"}
    assert body["steps"][3]["depends_on"] == ["b", "c"]
    run_until_idle(api.app)
    done = api.get(f"/workflows/{body['workflow_id']}", tenant="t1")
    assert done.status == 200
    assert done.body["state"] == "SUCCEEDED" and done.body["counts"] == {"SUCCEEDED": 4}
    listed = api.get("/workflows?state=SUCCEEDED", tenant="t1")
    assert [w["workflow_id"] for w in listed.body["workflows"]] == [body["workflow_id"]]
    assert api.get("/workflows", tenant="t2").body["workflows"] == []
    assert api.get(f"/workflows/{body['workflow_id']}", tenant="t2").status == 404


@pytest.mark.parametrize(("steps", "field", "message"), [
    ([{"id": "a", "task": "ok", "depends_on": ["a"]}], "steps[0].depends_on",
     "step 'a' depends on itself"),
    ([{"id": "a", "task": "ok"}, {"id": "b", "task": "ok", "depends_on": ["x"]}],
     "steps[1].depends_on", "unknown step 'x'"),
    ([{"id": "a", "task": "nope"}], "steps[0].task", "step 'a': unknown task"),
    ([{"id": f"s{i}", "task": "ok"} for i in range(501)], "steps", "at most 500 steps"),
])
def test_an_invalid_workflow_is_a_422_naming_the_step_and_writes_nothing(
        api: ApiClient, steps: list[dict[str, Any]], field: str, message: str) -> None:
    reply = api.post("/workflows", {"steps": steps})
    assert reply.status == 422
    assert reply.body["error"]["field"] == field
    assert message in reply.body["error"]["message"]
    scan = api.app.clients.dynamodb.scan
    assert scan(TableName=api.app.settings.workflows_table)["Count"] == 0
    assert scan(TableName=api.app.settings.jobs_table)["Count"] == 0


def test_a_replay_answers_200_and_cancel_stops_the_workflow(api: ApiClient) -> None:
    body = {**DIAMOND, "idempotency_key": "k"}
    first = api.post("/workflows", body)
    again = api.post("/workflows", body)
    assert (first.status, again.status) == (201, 200)
    assert again.body["workflow_id"] == first.body["workflow_id"]
    cancelled = api.delete(f"/workflows/{first.body['workflow_id']}")
    assert cancelled.status == 200 and cancelled.body["state"] == "CANCELLED"
    assert cancelled.body["counts"] == {"CANCELLED": 4}
    run_until_idle(api.app)
    assert api.delete(f"/workflows/{first.body['workflow_id']}").status == 200
    finished = api.post("/workflows", {"steps": [{"id": "x", "task": "ok"}]})
    run_until_idle(api.app)
    assert api.delete(f"/workflows/{finished.body['workflow_id']}").status == 409
