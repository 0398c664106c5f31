"""One rule for every route (issue 14): unreadable bodies, methods, strict types, one status
for an unknown task, one field syntax, payload limits, and a run_at in the past."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from leasehold.clock import FakeClock, iso, to_datetime
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import MAX_RESULT_BYTES
from leasehold.lifecycle.app import Leasehold

from .api_client import ApiClient

TABLES = ("jobs_table", "schedules_table", "tenants_table", "coordination_table",
          "workflows_table")


@pytest.fixture
def api(app: Leasehold, registry: TaskRegistry) -> ApiClient:
    @registry.task("ok")
    def ok(payload: Any, ctx: Any) -> Any:
        return payload

    @registry.task("echo", max_payload_bytes=MAX_RESULT_BYTES)
    def echo(payload: Any, ctx: Any) -> Any:
        return payload

    return ApiClient(app)


def stored(app: Leasehold) -> int:
    """Every item in every table: "nothing written" means this does not move."""
    return sum(int(app.clients.dynamodb.scan(TableName=getattr(app.settings, t),
                                             Select="COUNT")["Count"]) for t in TABLES)


def routes(**job: Any) -> list[tuple[str, dict[str, Any], str]]:
    """The same job fields on each of the four routes that take one, and where they land."""
    return [
        ("/jobs", {"task": "ok", **job}, ""),
        ("/schedules", {"cron": "@daily", "task": "ok", **job}, ""),
        ("/triggers", {"pattern": {"source": ["shop"]}, "task": "ok", **job}, ""),
        ("/workflows", {"steps": [{"id": "a", "task": "ok", **job}]}, "steps[0]."),
    ]


SURROGATE = "\ud800"


@pytest.mark.parametrize(("where", "value", "field"), [
    ("payload", {"note": SURROGATE}, "payload.note"),
    ("payload", ["fine", SURROGATE], "payload[1]"),
    ("labels", {"env": "a" + SURROGATE}, "labels.env"),
])
def test_a_lone_surrogate_is_a_400_naming_the_field_on_every_route_and_writes_nothing(
        api: ApiClient, where: str, value: Any, field: str) -> None:
    before = stored(api.app)
    for path, body, prefix in routes(**{where: value}):
        raw = json.dumps(body)  # ensure_ascii: the surrogate is spelt "\ud800", as a client would
        assert "\\ud800" in raw
        reply = api.post(path, raw=raw)
        assert reply.status == 400, (path, reply.body)
        assert reply.body["error"]["code"] == "bad_request"
        assert reply.body["error"]["field"] == prefix + field, path
    assert stored(api.app) == before


def test_a_surrogate_pair_is_text_and_accepted(api: ApiClient) -> None:
    reply = api.post("/jobs", raw=json.dumps({"task": "ok", "payload": "smile \U0001f600"}))
    assert reply.status == 201, reply.body
    assert reply.body["payload"] == "smile \U0001f600"


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("PUT", "/jobs", "GET, POST"),
    ("PATCH", "/jobs/01ABC", "DELETE, GET"),
    ("DELETE", "/stats", "GET"),
    ("GET", "/dead-letters/redrive", "POST"),
    ("PUT", "/schedules/01ABC", "DELETE, GET, PATCH"),
    ("POST", "/openapi.json", "GET"),  # a route the OpenAPI document leaves out
])
def test_an_unsupported_method_is_a_405_with_allow(api: ApiClient, method: str, path: str,
                                                   allow: str) -> None:
    reply = api.call(method, path, raw="{}" if method != "GET" else None)
    assert reply.status == 405, reply.body
    assert reply.headers["Allow"] == allow
    assert reply.body["error"]["code"] == "method_not_allowed"


def test_an_unknown_path_is_still_a_404(api: ApiClient) -> None:
    reply = api.call("PUT", "/nowhere")
    assert reply.status == 404 and "Allow" not in reply.headers


@pytest.mark.parametrize(("fields", "field"), [
    ({"max_attempts": True}, "max_attempts"),
    ({"max_attempts": "3"}, "max_attempts"),
    ({"timeout_seconds": "30"}, "timeout_seconds"),
    ({"priority": 1}, "priority"),
    ({"labels": {"env": 1}}, "labels.env"),
])
def test_wrong_json_types_are_a_422_naming_the_field_on_every_route(
        api: ApiClient, fields: dict[str, Any], field: str) -> None:
    for path, body, prefix in routes(**fields):
        reply = api.post(path, body)
        assert reply.status == 422, (path, reply.body)
        assert reply.body["error"]["field"] == prefix + field, (path, reply.body)
    assert stored(api.app) == 0


@pytest.mark.parametrize(("fields", "field"), [
    ({"delay_seconds": "10"}, "delay_seconds"),
    ({"run_at": 1_800_000_000_000}, "run_at"),
    ({"retry": {"min_backoff_seconds": "1"}}, "retry.min_backoff_seconds"),
])
def test_a_submission_is_not_coerced(api: ApiClient, fields: dict[str, Any], field: str) -> None:
    reply = api.post("/jobs", {"task": "ok", **fields})
    assert (reply.status, reply.body["error"]["field"]) == (422, field), reply.body


def test_an_unknown_task_is_the_same_422_on_every_route(api: ApiClient) -> None:
    for path, body, prefix in routes(task="nope"):
        reply = api.post(path, body)
        assert reply.status == 422, (path, reply.body)
        assert reply.body["error"]["code"] == "validation_error"
        assert reply.body["error"]["field"] == prefix + "task"
        assert "unknown task 'nope'" in reply.body["error"]["message"]
    assert stored(api.app) == 0


def test_field_paths_use_brackets_for_list_items_everywhere(api: ApiClient) -> None:
    policy = api.post("/workflows", {"steps": [{"id": "a", "task": "ok",
                                                "failure_policy": "shrug"}]})
    assert (policy.status, policy.body["error"]["field"]) == (422, "steps[0].failure_policy")
    state = api.get("/jobs?state=SUCCEEDED&state=NOPE")
    assert (state.status, state.body["error"]["field"]) == (422, "state[1]")
    nested = api.post("/schedules", {"cron": "@daily", "workflow": {
        "steps": [{"id": "a", "task": "ok", "max_attempts": "2"}]}})
    assert (nested.status, nested.body["error"]["field"]) == (
        422, "workflow.steps[0].max_attempts")


def test_a_payload_the_task_cannot_return_is_refused_at_submit(api: ApiClient) -> None:
    big = "x" * (100 * 1024)
    refused = api.post("/jobs", {"task": "echo", "payload": big})
    assert (refused.status, refused.body["error"]["field"]) == (413, "payload")
    assert str(MAX_RESULT_BYTES) in refused.body["error"]["message"]
    assert api.post("/jobs", {"task": "ok", "payload": big}).status == 201  # its own limit
    assert stored(api.app) == 2  # the second job and its tenant's counter


def test_the_limits_are_in_the_openapi_schema(api: ApiClient) -> None:
    schemas = api.get("/openapi.json").body["components"]["schemas"]
    assert "256 KB" in schemas["SubmitJob"]["properties"]["payload"]["description"]
    assert "64 KB" in schemas["JobOut"]["properties"]["result"]["description"]


def test_a_run_at_in_the_past_runs_now_and_the_answer_says_so(
        api: ApiClient, clock: FakeClock) -> None:
    past = iso(clock.now_ms() - 3_600_000)
    reply = api.post("/jobs", {"task": "ok", "run_at": past})
    assert reply.status == 201, reply.body
    assert reply.body["state"] == "QUEUED"
    assert reply.body["run_at"] == iso(clock.now_ms())
    assert reply.body["warnings"] == [f"run_at {past} is in the past; the job runs now"]
    future = api.post("/jobs", {"task": "ok", "run_at": iso(clock.now_ms() + 60_000)})
    assert future.body["warnings"] == []


def test_a_run_at_too_far_ahead_is_refused_in_dates(api: ApiClient, clock: FakeClock) -> None:
    far = to_datetime(clock.now_ms()) + timedelta(days=400)
    reply = api.post("/jobs", {"task": "ok", "run_at": far.isoformat()})
    assert (reply.status, reply.body["error"]["field"]) == (422, "run_at")
    message = reply.body["error"]["message"]
    assert str(far.year) in message and "e+" not in message
    assert iso(clock.now_ms() + 366 * 86_400_000) in message


def test_a_waiting_job_says_when_it_is_due(api: ApiClient, clock: FakeClock) -> None:
    job = api.post("/jobs", {"task": "ok", "delay_seconds": 30}).body
    assert job["due_in_seconds"] == 30
    clock.advance(12)
    assert api.get(f"/jobs/{job['job_id']}").body["due_in_seconds"] == 18
    listed = api.get("/jobs").body["jobs"]
    assert listed[0]["due_in_seconds"] == 18
    clock.advance(30)
    assert api.get(f"/jobs/{job['job_id']}").body["due_in_seconds"] is None
