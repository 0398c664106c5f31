"""HTTP targets through the real store, queues and worker (moto), against a local server.

The test runtime allows loopback explicitly (``http_allow``), as ``leasehold dev`` does; a
deployment refuses it (tests/unit/test_target_addresses.py).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from email.utils import format_datetime
from typing import Any

import pytest

from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock, to_datetime
from leasehold.core.policy import RetryPolicy
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.targets.http_call import RESULT_BODY_BYTES
from tests.conftest import MakeApp
from tests.integration.api_client import api_for
from tests.integration.helpers import deliver, inject
from tests.integration.target_server import Server, serve
from tests.integration.test_client_operations import client_for
from tests.unit.test_target_specs import BAD_TARGETS

SECRET = "s3cr3t-value-7d1f0c"


def loopback(*servers: Server) -> dict[str, Any]:
    """The test deployment: loopback allowed, and two secrets bound to ``servers``."""
    origins = [server.url for server in servers]
    return {"http_allow": ["127.0.0.0/8", "::1"],
            "http_secrets": {"partner-api-key": {"secret": "secretsmanager:partner-api-key",
                                                 "origins": origins},
                             "ssm-key": {"secret": "ssm:/partner/key", "origins": origins}}}


@pytest.fixture
def server() -> Iterator[Server]:
    yield from serve()


@pytest.fixture
def app(make_app: MakeApp, tmp_path: Any, server: Server) -> Leasehold:
    made = make_app(targets=loopback(server), event_bus=f"file:{tmp_path / 'events.jsonl'}",
                    publish="all")
    made.clients.client("secretsmanager").create_secret(Name="partner-api-key",
                                                        SecretString=SECRET)
    made.clients.client("ssm").put_parameter(Name="/partner/key", Value=SECRET + "-ssm",
                                             Type="SecureString")
    return made


def http_job(app: Leasehold, http: dict[str, Any], **options: Any) -> str:
    return submit(app, JobSpec(target={"http": http}, **options)).job.job_id


def run(app: Leasehold, rounds: int = 10) -> None:
    """Deliver until nothing is visible (a retry due at once is delivered by the next)."""
    for _ in range(rounds):
        if not deliver(app):
            return


def run_until(app: Leasehold, job_id: str, state: JobState, seconds: float = 10) -> None:
    """Deliver until the job is in ``state`` (a delayed retry's message is visible after its
    SQS delay, in real time), or fail after ``seconds``."""
    ends = time.monotonic() + seconds
    while app.store.get(job_id).state is not state:
        assert time.monotonic() < ends, f"{job_id} never reached {state}"
        if not deliver(app):
            time.sleep(0.1)


def test_the_request_arrives_as_given_and_a_2xx_succeeds_with_the_result(
        app: Leasehold, server: Server) -> None:
    answer = b'{"order": 7, "state": "created"}'
    server.default = (201, {"Content-Type": "application/json", "ETag": '"v7"',
                            "Set-Cookie": "session=abc"}, answer)
    job_id = http_job(app, {"url": f"{server.url}/v1/orders?x=1", "method": "POST",
                            "headers": {"X-Request-Source": "leasehold"},
                            "body": {"id": 7}})
    run(app)
    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/v1/orders?x=1")
    assert request.headers["X-Request-Source"] == "leasehold"
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Host"] == server.url.removeprefix("http://")
    assert json.loads(request.body) == {"id": 7}
    job = app.store.get(job_id)
    assert job.state is JobState.SUCCEEDED and job.task == "leasehold.http"
    assert json.loads(job.result_json or "null") == {
        "status": 201, "headers": {"content-type": "application/json", "etag": '"v7"'},
        "body": {"order": 7, "state": "created"}, "body_bytes": len(answer), "truncated": False}


def test_a_long_body_is_cut_at_the_stated_size_and_the_result_says_so(
        app: Leasehold, server: Server) -> None:
    server.default = (200, {"Content-Type": "text/plain"}, b"x" * (RESULT_BODY_BYTES + 10))
    job_id = http_job(app, {"url": server.url})
    run(app)
    result = json.loads(app.store.get(job_id).result_json or "null")
    assert result["truncated"] is True and result["body_bytes"] == RESULT_BODY_BYTES + 10
    assert result["body"] == "x" * RESULT_BODY_BYTES


def test_a_500_is_retried_then_dead_then_redriven_to_success(
        app: Leasehold, server: Server) -> None:
    server.answers = [(500, {}, b"boom")] * 3
    job_id = http_job(app, {"url": f"{server.url}/hook", "method": "POST", "body": "hi"},
                      max_attempts=3, retry=RetryPolicy(min_backoff_seconds=0,
                                                        max_backoff_seconds=0))
    run(app)
    job = app.store.get(job_id)
    assert job.state is JobState.DEAD and len(server.requests) == 3
    assert job.error is not None and job.error.type == "HTTP500"
    assert "HTTP 500" in job.error.message
    control.retry(app, job_id)  # the redrive: the server answers 200 now
    run(app)
    assert app.store.get(job_id).state is JobState.SUCCEEDED and len(server.requests) == 4


def test_4xx_other_than_408_and_429_is_not_retried(app: Leasehold, server: Server) -> None:
    statuses = {404: False, 400: False, 409: False, 408: True, 429: True, 502: True}
    seen: dict[str, int] = {}

    def by_path(request: Any) -> tuple[int, dict[str, str], bytes]:
        seen[request.path] = seen.get(request.path, 0) + 1
        return (int(request.path[1:]) if seen[request.path] == 1 else 200), {}, b""

    server.default = by_path
    ids = {status: http_job(app, {"url": f"{server.url}/{status}"},
                            retry=RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0))
           for status in statuses}
    run(app)
    for status, retried in statuses.items():
        job = app.store.get(ids[status])
        assert seen[f"/{status}"] == (2 if retried else 1), status
        assert job.state is (JobState.SUCCEEDED if retried else JobState.DEAD)
        assert job.extra["attempt_errors"][0]["type"] == f"HTTP{status}"


@pytest.mark.parametrize("form", ["seconds", "date"])
def test_a_429_with_retry_after_sets_the_next_attempt_exactly(
        app: Leasehold, server: Server, clock: FakeClock, form: str) -> None:
    when = to_datetime(clock.now_ms() + 2000)
    server.answers = [(429, {"Retry-After": "2" if form == "seconds" else
                             format_datetime(when, usegmt=True)}, b"slow down")]
    # A backoff of an hour: only the Retry-After can bring the retry 2 s later.
    job_id = http_job(app, {"url": server.url},
                      retry=RetryPolicy(min_backoff_seconds=3600, max_backoff_seconds=3600))
    failed_at = clock.now_ms()
    deliver(app)
    job = app.store.get(job_id)
    assert job.state is JobState.QUEUED and job.error is not None
    assert job.error.type == "HTTP429"
    assert job.run_at == failed_at + 2000  # exactly: the clock stood still while it ran
    run_until(app, job_id, JobState.SUCCEEDED)
    [first, second] = server.requests
    assert second.at - first.at >= 1.0  # SQS holds it whole seconds; the worker waits the rest
    assert clock.now_ms() >= failed_at + 2000


def test_a_503_retry_after_is_honoured_but_a_500_s_is_not(
        app: Leasehold, server: Server, clock: FakeClock) -> None:
    server.answers = [(500, {"Retry-After": "2"}, b"")]
    job_id = http_job(app, {"url": server.url},
                      retry=RetryPolicy(min_backoff_seconds=3600, max_backoff_seconds=3600))
    deliver(app)
    assert app.store.get(job_id).run_at == clock.now_ms() + 3_600_000


def test_a_hung_server_times_out_at_timeout_seconds(app: Leasehold, server: Server) -> None:
    def hang(request: Any) -> tuple[int, dict[str, str], bytes]:
        time.sleep(4)
        return 200, {}, b""

    server.answers = [hang]
    job_id = http_job(app, {"url": server.url, "timeout_seconds": 1}, max_attempts=1)
    started = time.monotonic()
    deliver(app)
    took = time.monotonic() - started
    job = app.store.get(job_id)
    assert job.state is JobState.DEAD and job.error is not None
    assert job.error.type == "HttpTimeout"
    assert 1.0 <= took < 3.0  # 1 s, not the server's 4 s (nor the attempt's backstop)


def test_a_secret_header_reaches_the_server_and_appears_nowhere_else(
        app: Leasehold, server: Server, caplog: pytest.LogCaptureFixture,
        tmp_path: Any) -> None:
    caplog.set_level(logging.DEBUG)
    server.default = (200, {"Content-Type": "application/json"},
                      b'{"echo": "the server answers without the secret"}')
    ids = [
        http_job(app, {"url": server.url, "method": "POST", "body": {"a": 1},
                       "auth": {"secret_header": {"name": "Authorization",
                                                  "secret": "partner-api-key",
                                                  "prefix": "Bearer "}}}),
        http_job(app, {"url": server.url,
                       "auth": {"secret_header": {"name": "X-Api-Key", "secret": "ssm-key"}}}),
    ]
    run(app)
    assert server.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    assert server.requests[1].headers["X-Api-Key"] == f"{SECRET}-ssm"
    api = api_for(app)
    views = [api.get(f"/jobs/{job_id}").body for job_id in ids]
    assert all(view["state"] == "SUCCEEDED" for view in views)
    rows = app.clients.dynamodb.scan(TableName=app.settings.jobs_table)["Items"]
    events = (tmp_path / "events.jsonl").read_text()
    assert events.count('"SUCCEEDED"') >= 2  # the events were written, without the secret
    for place in (json.dumps(rows), json.dumps(views), events, caplog.text):
        assert SECRET not in place


def test_a_secret_header_is_not_sent_to_another_origin_on_a_redirect(
        app: Leasehold, server: Server) -> None:
    other = serve()
    elsewhere = next(other)
    try:
        server.answers = [(302, {"Location": f"{elsewhere.url}/landing"}, b"")]
        job_id = http_job(app, {"url": server.url, "follow_redirects": True,
                                "auth": {"secret_header": {"name": "Authorization",
                                                           "secret": "partner-api-key"}}})
        run(app)
        assert app.store.get(job_id).state is JobState.SUCCEEDED
        assert server.requests[0].headers["Authorization"] == SECRET
        [landed] = elsewhere.requests
        assert landed.path == "/landing" and "Authorization" not in landed.headers
    finally:
        other.close()


def test_a_redirect_is_not_followed_unless_the_target_says_so(
        app: Leasehold, server: Server) -> None:
    server.answers = [(302, {"Location": "/elsewhere"}, b"")]
    job_id = http_job(app, {"url": server.url})
    run(app)
    job = app.store.get(job_id)
    assert len(server.requests) == 1
    assert job.state is JobState.DEAD and job.error is not None
    assert job.error.type == "HTTP302"


def test_a_redirect_to_the_metadata_address_is_refused_at_the_hop(
        app: Leasehold, server: Server) -> None:
    server.answers = [(307, {"Location": "http://169.254.169.254/latest/meta-data/"}, b"")]
    job_id = http_job(app, {"url": server.url, "follow_redirects": True})
    run(app)
    job = app.store.get(job_id)
    assert job.state is JobState.DEAD and job.error is not None
    assert job.error.type == "AddressRefused" and "link-local" in job.error.message


def test_bad_input_through_the_api_is_a_422_naming_the_field_and_writes_nothing(
        app: Leasehold) -> None:
    api = api_for(app)
    for target, field in ((BAD_TARGETS[0]), (BAD_TARGETS[5]), (BAD_TARGETS[-1])):
        reply = api.post("/jobs", {"target": target})
        assert reply.status == 422, reply.body
        assert field in json.dumps(reply.body)
    assert app.clients.dynamodb.scan(TableName=app.settings.jobs_table)["Count"] == 0


def test_task_and_target_together_or_neither_are_refused(app: Leasehold) -> None:
    api = api_for(app)
    both = api.post("/jobs", {"task": "echo", "target": {"http": {"url": "https://a.example"}}})
    assert both.status == 422 and "not both" in json.dumps(both.body)
    neither = api.post("/jobs", {"payload": 1})
    assert neither.status == 422 and "target" in json.dumps(neither.body)
    direct = api.post("/jobs", {"task": "leasehold.http", "payload": {"url": "http://x"}})
    assert direct.status == 422 and "internal" in json.dumps(direct.body)


def test_a_target_job_through_the_api_runs_and_its_view_keeps_the_tenant(
        app: Leasehold, server: Server) -> None:
    api = api_for(app)
    reply = api.post("/jobs", {"target": {"http": {"url": f"{server.url}/p"}},
                               "priority": "high"}, tenant="acme")
    assert reply.status == 201, reply.body
    job_id = reply.body["job_id"]
    run(app)
    mine = api.get(f"/jobs/{job_id}", tenant="acme")
    assert mine.status == 200 and mine.body["state"] == "SUCCEEDED"
    assert mine.body["result"]["status"] == 200
    assert mine.body["flow"]["concurrency"]["key"] == \
        f"http:{server.url.removeprefix('http://')}"
    assert api.get(f"/jobs/{job_id}", tenant="other").status == 404
    listed = api.get("/jobs", tenant="other").body
    assert job_id not in json.dumps(listed)


def test_the_client_submits_a_target_and_waits_for_its_result(
        app: Leasehold, server: Server) -> None:
    client = client_for(app, "acme")
    handle = client.submit_target({"http": {"url": f"{server.url}/c", "method": "PUT",
                                            "body": "plain text"}}, priority="high")
    deliver(app)
    assert handle.result(timeout=0)["status"] == 200
    assert (server.requests[0].method, server.requests[0].body) == ("PUT", b"plain text")
    assert server.requests[0].headers["Content-Type"] == "text/plain; charset=utf-8"


def test_a_workflow_step_and_a_schedule_s_job_may_be_targets(
        app: Leasehold, server: Server) -> None:
    api = api_for(app)
    started = api.post("/workflows", {"steps": [
        {"id": "call", "target": {"http": {"url": f"{server.url}/step", "method": "POST",
                                           "body": {"n": 1}}}},
        {"id": "after", "depends_on": ["call"],
         "target": {"http": {"url": f"{server.url}/after"}}}]})
    assert started.status == 201, started.body
    run(app)
    workflow = api.get(f"/workflows/{started.body['workflow_id']}").body
    assert workflow["state"] == "SUCCEEDED", workflow
    assert [r.path for r in server.requests] == ["/step", "/after"]
    bad = api.post("/workflows", {"steps": [
        {"id": "x", "target": {"http": {"url": "http://10.0.0.1/"}}}]})
    assert bad.status == 422 and "steps[0].target.http.url" in json.dumps(bad.body)

    made = api.post("/schedules", {"cron": "*/5 * * * *",
                                   "target": {"http": {"url": f"{server.url}/tick"}}})
    assert made.status == 201, made.body
    assert made.body["task"] == "leasehold.http"
    schedule_id = made.body["schedule_id"]
    # A change of another field keeps the target; a new target replaces it, checked again.
    changed = api.call("PATCH", f"/schedules/{schedule_id}", {"priority": "high"})
    assert changed.status == 200, changed.body
    assert changed.body["payload"]["url"] == f"{server.url}/tick"
    refused = api.call("PATCH", f"/schedules/{schedule_id}",
                       {"target": {"http": {"url": "http://169.254.169.254/"}}})
    assert refused.status == 422 and "target.http.url" in json.dumps(refused.body)
    both = api.post("/schedules", {"cron": "*/5 * * * *", "task": "echo",
                                   "target": {"http": {"url": f"{server.url}/tick"}}})
    assert both.status == 422


def test_a_retry_after_survives_a_lost_response_on_the_retry_s_write(
        app: Leasehold, server: Server, clock: FakeClock) -> None:
    server.answers = [(429, {"Retry-After": "2"}, b"")]
    job_id = http_job(app, {"url": server.url},
                      retry=RetryPolicy(min_backoff_seconds=3600, max_backoff_seconds=3600))
    # The write that records the retry lands, and the worker sees an error past botocore's
    # retries: its next try must recognise its own change, with the same time.
    injector = inject(app, Fault(target="dynamodb.TransactWriteItems", kind="lose-raise",
                                 when=lambda body: "HTTP429" in json.dumps(body)))
    failed_at = clock.now_ms()
    deliver(app)
    assert sum(injector.injected.values()) == 1
    job = app.store.get(job_id)
    assert job.state is JobState.QUEUED and job.run_at == failed_at + 2000
    run_until(app, job_id, JobState.SUCCEEDED)
    assert len(server.requests) == 2  # one retry, whatever messages the lost write left
