"""The API's schema is the contract (issue 30): what it allows is never a 500, what it
refuses the server refuses, and the server reads a request as the schema describes it."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest

from leasehold.api.app import openapi_json
from leasehold.core.context import JobContext
from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold

from .api_client import ApiClient
from .helpers import deliver

TINY = 1e-131  # below DynamoDB's smallest number (1e-130): boto3 raises decimal.Underflow
DOCUMENT = json.loads(openapi_json())
#: The longest callback name (128), with colons: its token is 188 characters, 318 sent with
#: each ``:`` as ``%3A``.
LONG_NAME = "a" + "b:" * 63 + "c"


@pytest.fixture
def api(app: Leasehold, registry: TaskRegistry) -> ApiClient:
    @registry.task("echo")
    def echo(payload: Any, ctx: JobContext) -> Any:
        return payload

    @registry.task("approval")
    def approval(payload: Any, ctx: JobContext) -> Any:
        return ctx.callback(LONG_NAME, timeout_seconds=3600).wait()

    return ApiClient(app)


def _items(app: Leasehold, table: str) -> int:
    return int(app.clients.dynamodb.scan(TableName=table, Select="COUNT")["Count"])


STEP = {"id": "a", "task": "echo"}


@pytest.mark.parametrize(("method", "path", "body", "field"), [
    ("POST", "/jobs", {"task": "echo", "retry": {"min_backoff_seconds": TINY}},
     "retry.min_backoff_seconds"),
    ("POST", "/jobs", {"task": "echo", "retry": {"max_backoff_seconds": TINY}},
     "retry.max_backoff_seconds"),
    ("POST", "/jobs", {"task": "echo", "retry": {"max_retry_age_seconds": TINY}},
     "retry.max_retry_age_seconds"),
    ("POST", "/workflows", {"steps": [{**STEP, "retry": {"min_backoff_seconds": TINY}}]},
     "steps[0].retry.min_backoff_seconds"),
    ("POST", "/workflows", {"steps": [{**STEP, "retry": {"max_retry_age_seconds": TINY}}]},
     "steps[0].retry.max_retry_age_seconds"),
    ("POST", "/schedules", {"cron": "* * * * *", "task": "echo", "jitter_seconds": TINY},
     "jitter_seconds"),
    ("POST", "/schedules", {"cron": "* * * * *", "workflow": {
        "steps": [{**STEP, "retry": {"max_retry_age_seconds": TINY}}]}},
     "workflow.steps[0].retry.max_retry_age_seconds"),
])
def test_a_duration_below_a_millisecond_is_a_422_and_nothing_is_written(
        api: ApiClient, method: str, path: str, body: dict[str, Any], field: str) -> None:
    reply = api.call(method, path, body, tenant="t1")
    assert reply.status == 422, reply.body
    assert reply.body["error"]["field"] == field
    assert "0 or at least 0.001" in reply.body["error"]["message"] or \
        "greater than or equal to 0.001" in reply.body["error"]["message"]
    settings = api.app.settings
    for table in (settings.jobs_table, settings.workflows_table, settings.schedules_table):
        assert _items(api.app, table) == 0, table  # no workflow left CREATING, no job


def test_a_schedules_jitter_below_a_millisecond_is_refused_in_an_update_too(
        api: ApiClient) -> None:
    created = api.post("/schedules", {"cron": "0 9 * * *", "task": "echo"}, tenant="t1")
    assert created.status == 201, created.body
    path = f"/schedules/{created.body['schedule_id']}"
    assert api.call("PATCH", path, {"jitter_seconds": TINY}, tenant="t1").status == 422
    assert api.call("PATCH", path, {"jitter_seconds": 0}, tenant="t1").status == 200
    assert api.get(path, tenant="t1").body["version"] == created.body["version"] + 1


def test_zero_and_a_millisecond_are_durations_the_schema_and_the_server_accept(
        api: ApiClient) -> None:
    for value in (0, 0.001):
        retry = {"min_backoff_seconds": value, "max_backoff_seconds": value}
        assert api.post("/jobs", {"task": "echo", "retry": retry}, tenant="t1").status == 201
    rule = DOCUMENT["components"]["schemas"]["RetryIn"]["properties"]["min_backoff_seconds"]
    number = next(s for s in rule["anyOf"] if s.get("type") == "number")
    assert number["minimum"] == 0 and number["not"] == {"exclusiveMinimum": 0,
                                                        "exclusiveMaximum": 0.001}


@pytest.mark.parametrize("value", ["1700000000", "1700000000.5", "2027-01-01"])
def test_created_before_and_after_take_only_an_iso_time(api: ApiClient, value: str) -> None:
    for name in ("created_before", "created_after"):
        reply = api.get(f"/jobs?{name}={value}", tenant="t1")
        assert reply.status == 422, reply.body
        assert reply.body["error"]["field"] == name
    assert api.get("/jobs?created_before=2027-01-01T00:00:00Z", tenant="t1").status == 200


def test_a_callback_token_sent_percent_encoded_is_read_decoded(api: ApiClient) -> None:
    job = api.post("/jobs", {"task": "approval"}, tenant="t1").body
    deliver(api.app)
    steps = api.get(f"/jobs/{job['job_id']}/steps", tenant="t1").body["steps"]
    token = steps[0]["token"]
    encoded = quote(token, safe="")
    # A 37-character job id (its home included), the secret and the longest name (128).
    assert len(token) == 199 and len(encoded) == 329  # the limit (300) is on the token
    reply = api.post(f"/callbacks/{encoded}", {"ok": True}, tenant="t1")
    assert (reply.status, reply.body["changed"]) == (200, True), reply.body
    again = api.post(f"/callbacks/{encoded}/fail", {"error": "late"}, tenant="t1")
    assert (again.status, again.body["changed"]) == (200, False)
    prefix = f"{job['job_id']}:{'0' * 32}:"
    unknown = quote(prefix + "d" * (299 - len(prefix)), safe="")
    assert api.post(f"/callbacks/{unknown}", 1, tenant="t1").status == 404
    too_long = quote(prefix + "d" * (301 - len(prefix)), safe="")
    assert api.post(f"/callbacks/{too_long}", 1, tenant="t1").status == 422


def test_a_flow_key_is_decoded_once(api: ApiClient) -> None:
    assert api.get("/flow/keys/a%2Fb", tenant="t1").body["key"] == "a/b"
    assert api.get("/flow/keys/a%252Fb", tenant="t1").body["key"] == "a%2Fb"


def _answers(method: str, path: str) -> set[str]:
    return set(DOCUMENT["paths"][path][method]["responses"])


def test_every_answer_the_server_gives_is_in_the_document(api: ApiClient) -> None:
    unknown_schedule = api.get("/jobs?schedule_id=nosuch", tenant="t1")
    assert unknown_schedule.status == 404 and "404" in _answers("get", "/jobs")
    not_utf8 = api.call("POST", "/callbacks/a:" + "0" * 32 + ":b/fail", raw=b"\xff\xfe",
                        tenant="t1")
    assert not_utf8.status == 400 and "400" in _answers("post", "/callbacks/{token}/fail")
    for path in [p for p, ops in DOCUMENT["paths"].items() for m, op in ops.items()
                 if "requestBody" in op]:
        for method, op in DOCUMENT["paths"][path].items():
            if "requestBody" in op:  # a body may be unreadable or too large
                assert {"400", "413"} <= set(op["responses"]), (method, path)
    for path in ("/schedules/{schedule_id}", "/triggers/{trigger_id}"):
        deleted = DOCUMENT["paths"][path]["delete"]["responses"]["204"]
        assert deleted.get("content") in (None, {})  # 204 has no body


def test_a_new_schedule_is_one_of_a_job_or_a_workflow() -> None:
    rule = DOCUMENT["components"]["schemas"]["NewScheduleIn"]
    assert rule["required"] == ["cron"]
    assert [branch["required"] for branch in rule["oneOf"]] == [["task"], ["target"],
                                                                ["workflow"]]
