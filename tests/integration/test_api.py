"""The API handler driven with API Gateway proxy events over moto."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest

import leasehold
from leasehold.api.app import openapi_json
from leasehold.api.context import ApiConfig
from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.local.gateway import proxy_event
from leasehold.tenancy.admission import Limits

from .api_client import ApiClient
from .helpers import deliver


@pytest.fixture
def tasks(registry: TaskRegistry) -> TaskRegistry:
    @registry.task("echo")
    def echo(payload: Any, ctx: Any) -> Any:
        return payload

    @registry.task("boom", max_attempts=1)
    def boom(payload: Any, ctx: Any) -> Any:
        raise RuntimeError("boom")

    return registry


@pytest.fixture
def api(app: Leasehold, tasks: TaskRegistry) -> ApiClient:
    return ApiClient(app)


def scan_count(app: Leasehold) -> int:
    return int(app.clients.dynamodb.scan(TableName=app.settings.jobs_table,
                                         Select="COUNT")["Count"])


def test_submitted_job_runs_and_reads_back_with_its_result(api: ApiClient) -> None:
    created = api.post("/jobs", {"task": "echo", "payload": {"x": 1}, "priority": "high",
                                 "labels": {"team": "a"}})
    assert created.status == 201
    assert created.body["state"] == "QUEUED" and created.body["priority"] == "high"
    deliver(api.app)
    job = api.get(f"/jobs/{created.body['job_id']}")
    assert job.status == 200
    assert job.body["state"] == "SUCCEEDED"
    assert job.body["result"] == {"x": 1}
    assert job.body["attempts"] == 1
    assert [h["to"] for h in job.body["history"]] == ["QUEUED", "RUNNING", "SUCCEEDED"]


def test_idempotent_replay_answers_200_with_the_same_job(api: ApiClient) -> None:
    body = {"task": "echo", "payload": 1, "idempotency_key": "order-7"}
    first = api.post("/jobs", body)
    again = api.post("/jobs", body)
    assert (first.status, again.status) == (201, 200)
    assert again.body["job_id"] == first.body["job_id"]
    different = api.post("/jobs", {**body, "payload": 2})
    assert different.status == 409
    assert different.body["error"]["code"] == "idempotency_conflict"
    assert scan_count(api.app) == 1


@pytest.mark.parametrize(
    ("raw", "status", "code", "field"),
    [
        ("{not json", 400, "bad_request", None),
        ("", 400, "bad_request", None),
        ('{"task": 5}', 422, "validation_error", "task"),
        ('{"task": "echo", "priority": "urgent"}', 422, "validation_error", "priority"),
        ('{"task": "echo", "max_attempts": "many"}', 422, "validation_error", "max_attempts"),
        ('{"task": "echo", "surprise": 1}', 422, "validation_error", "surprise"),
        ('{"task": "nope"}', 422, "validation_error", "task"),
        ('{"task": "ec\\u0000ho"}', 422, "validation_error", "task"),
        ('{"task": "echo", "labels": {"k": "a\\u0007b"}}', 422, "validation_error", "labels.k"),
        ('{"task": "echo", "pool": "gpu"}', 422, "validation_error", "pool"),
        ('{"task": "echo", "delay_seconds": 1, "run_at": "2026-01-01T00:00:00Z"}', 422,
         "validation_error", "run_at"),
        ('{"task": "echo", "run_at": "2026-01-01T00:00:00"}', 422, "validation_error", "run_at"),
        (json.dumps({"task": "echo", "payload": "x" * (256 * 1024)}), 413, "payload_too_large",
         "payload"),
        (json.dumps({"task": "echo", "payload": "x" * (400 * 1024)}), 413, "payload_too_large",
         None),
    ],
)
def test_bad_submissions_get_their_4xx_and_write_nothing(
    api: ApiClient, raw: str, status: int, code: str, field: str | None
) -> None:
    reply = api.post("/jobs", raw=raw)
    assert reply.status == status, reply.body
    assert reply.body["error"]["code"] == code
    assert reply.body["error"]["field"] == field
    assert scan_count(api.app) == 0
    tenants = api.app.clients.dynamodb.scan(TableName=api.app.settings.tenants_table)
    assert tenants["Count"] == 0  # not even a token was spent


def test_another_tenants_job_is_not_found_for_every_verb(api: ApiClient) -> None:
    job_id = api.post("/jobs", {"task": "echo"}, tenant="alice").body["job_id"]
    assert api.get(f"/jobs/{job_id}", tenant="bob").status == 404
    assert api.delete(f"/jobs/{job_id}", tenant="bob").status == 404
    assert api.post(f"/jobs/{job_id}/retry", tenant="bob").status == 404
    assert api.get("/jobs", tenant="bob").body["jobs"] == []
    assert api.get(f"/jobs/{job_id}", tenant="alice").status == 200
    assert api.app.store.get(job_id).state is JobState.QUEUED


def test_the_tenant_never_comes_from_the_header_behind_api_gateway(app: Leasehold,
                                                                   tasks: TaskRegistry) -> None:
    api = ApiClient(app, ApiConfig(trust_tenant_header=False))
    assert api.post("/jobs", {"task": "echo"}, tenant="alice").status == 401
    event = proxy_event("POST", "/jobs", {"X-Leasehold-Tenant": "alice"},
                        json.dumps({"task": "echo"}))
    event["requestContext"]["authorizer"] = {"claims": {"sub": "carol"}}
    reply = api.call("POST", "/jobs", event=event)
    assert reply.status == 201 and reply.body["tenant"] == "carol"
    event = proxy_event("GET", "/jobs")
    event["requestContext"]["identity"] = {
        "userArn": "arn:aws:sts::123456789012:assumed-role/Billing/session-1"}
    assert api.call("GET", "/jobs", event=event).status == 200


def test_listing_pages_through_every_job_once_with_filters(api: ApiClient,
                                                           clock: FakeClock) -> None:
    ids = []
    for i in range(7):
        clock.advance(1)
        ids.append(api.post("/jobs", {"task": "echo", "payload": i,
                                      "priority": "low" if i % 2 else "high"}).body["job_id"])
    seen: list[str] = []
    cursor = None
    while True:
        query = "/jobs?limit=3" + (f"&cursor={cursor}" if cursor else "")
        page = api.get(query).body
        seen += [j["job_id"] for j in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))
    high_only = [j for j in api.get("/jobs?state=QUEUED&limit=50").body["jobs"]
                 if j["priority"] == "high"]
    assert len(high_only) == 4
    assert api.get("/jobs?state=SUCCEEDED").body["jobs"] == []
    assert api.get("/jobs?cursor=bogus").status == 400
    assert api.get("/jobs?state=NOPE").status == 422


def test_cancel_then_retry_and_conflicts(api: ApiClient) -> None:
    job_id = api.post("/jobs", {"task": "echo", "delay_seconds": 60}).body["job_id"]
    assert api.post(f"/jobs/{job_id}/retry").status == 409  # not finished
    cancelled = api.delete(f"/jobs/{job_id}")
    assert cancelled.status == 200 and cancelled.body["state"] == "CANCELLED"
    assert api.delete(f"/jobs/{job_id}").status == 409
    retried = api.post(f"/jobs/{job_id}/retry")
    assert retried.status == 200 and retried.body["state"] == "QUEUED"
    assert api.get("/jobs/NOSUCHJOB").status == 404


def test_dead_letters_list_and_redrive(api: ApiClient) -> None:
    job_id = api.post("/jobs", {"task": "boom"}).body["job_id"]
    api.post("/jobs", {"task": "boom"}, tenant="other")
    deliver(api.app)
    dead = api.get("/dead-letters").body["jobs"]
    assert [j["job_id"] for j in dead] == [job_id]
    assert dead[0]["error"]["message"] == "boom"
    assert api.post("/dead-letters/redrive", {"pool": "gpu"}).status == 422
    report = api.post("/dead-letters/redrive", {"pool": "default"}).body
    assert report["redriven"] == [job_id]
    assert report["stale_removed"] == 1  # our DLQ copy; the other tenant's copy stays
    assert api.get(f"/jobs/{job_id}").body["state"] == "QUEUED"
    assert len(api.get("/dead-letters", tenant="other").body["jobs"]) == 1


def test_stats_count_jobs_by_state_per_tenant(api: ApiClient) -> None:
    api.post("/jobs", {"task": "echo"})
    api.post("/jobs", {"task": "boom"})
    api.post("/jobs", {"task": "echo"}, tenant="other")
    deliver(api.app)
    stats = api.get("/stats").body
    assert stats["jobs"]["SUCCEEDED"] == 1 and stats["jobs"]["DEAD"] == 1
    assert "QUEUED" not in stats["jobs"] and stats["live"] == 0
    assert {q["priority"] for q in stats["queues"]} == {"high", "normal", "low"}
    assert sum(q["dead_letters"] for q in stats["queues"]) == 1


def test_stats_count_jobs_from_schedules_triggers_workflows_and_the_library_too(
        api: ApiClient) -> None:
    app = api.app
    api.post("/jobs", {"task": "echo"})
    submit(app, JobSpec(task="echo"))
    submit(app, JobSpec(task="boom"))
    api.post("/triggers", {"pattern": {"source": ["shop"]}, "task": "echo"})
    assert api.post("/events", {"source": "shop", "detail-type": "Paid", "detail": {}}).status \
        == 200
    api.post("/workflows", {"steps": [{"id": "a", "task": "echo"},
                                      {"id": "b", "task": "echo", "depends_on": ["a"]}]})
    deliver(app)
    deliver(app)
    jobs = api.get("/stats").body["jobs"]
    assert (jobs["SUCCEEDED"], jobs["DEAD"]) == (5, 1)
    done = [j for j in api.get("/jobs?limit=50").body["jobs"] if j["state"] == "SUCCEEDED"]
    assert len(done) == 5  # the counters agree with the jobs themselves


def test_a_flooding_tenant_gets_429_while_another_proceeds(app: Leasehold,
                                                           tasks: TaskRegistry) -> None:
    api = ApiClient(app, ApiConfig(trust_tenant_header=True,
                                   limits=Limits(rate=1, burst=5, max_live=1000)))
    statuses = [api.post("/jobs", {"task": "echo"}, tenant="flood").status for _ in range(8)]
    assert statuses == [201] * 5 + [429] * 3
    limited = api.post("/jobs", {"task": "echo"}, tenant="flood")
    assert limited.headers["Retry-After"] == "1"
    assert limited.body["error"]["code"] == "rate_limited"
    assert api.post("/jobs", {"task": "echo"}, tenant="calm").status == 201


def test_the_live_job_cap_refuses_until_jobs_finish(app: Leasehold, tasks: TaskRegistry) -> None:
    api = ApiClient(app, ApiConfig(trust_tenant_header=True,
                                   limits=Limits(rate=100, burst=100, max_live=2)))
    assert [api.post("/jobs", {"task": "echo"}).status for _ in range(3)] == [201, 201, 429]
    deliver(app)
    assert api.post("/jobs", {"task": "echo"}).status == 201


def test_a_full_backlog_answers_503(app: Leasehold, tasks: TaskRegistry) -> None:
    api = ApiClient(app, ApiConfig(trust_tenant_header=True, limits=Limits(max_backlog=2)))
    assert api.post("/jobs", {"task": "echo"}).status == 201
    api.config.backlog._ttl = 0  # see every submission's effect at once
    assert api.post("/jobs", {"task": "echo"}, tenant="b").status == 201
    busy = api.post("/jobs", {"task": "echo"}, tenant="c")
    assert busy.status == 503 and busy.headers["Retry-After"] == "10"


def test_unknown_routes_and_health(api: ApiClient) -> None:
    assert api.get("/nope").status == 404
    health = api.get("/healthz").body
    assert health["status"] == "ok"
    # The version a user reads with `leasehold --version` (issue 47).
    assert health["version"] == leasehold.__version__ == importlib.metadata.version("leasehold")
    assert api.get("/workers").body == {"workers": []}


def test_served_openapi_matches_the_committed_document(api: ApiClient) -> None:
    served = api.get("/openapi.json")
    committed = Path(__file__).parents[2] / "docs" / "openapi.json"
    assert served.body == json.loads(committed.read_text())
    assert committed.read_text() == openapi_json(), (
        "regenerate: python -c \"from leasehold.api.app import openapi_json; "
        "open('docs/openapi.json', 'w').write(openapi_json())\"")
