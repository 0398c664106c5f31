"""``GET /jobs/{id}?wait_seconds=N``: answered as soon as the job is finished, else after N
seconds (on the app's clock); and a result over its limit fails the job as PayloadTooLarge."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import MAX_RESULT_BYTES
from leasehold.lifecycle.app import Leasehold

from .api_client import ApiClient
from .helpers import deliver


@pytest.fixture
def tasks(registry: TaskRegistry) -> TaskRegistry:
    @registry.task("echo")
    def echo(payload: Any, ctx: Any) -> Any:
        return payload

    @registry.task("huge", max_attempts=5)
    def huge(payload: Any, ctx: Any) -> Any:
        return "x" * (MAX_RESULT_BYTES + 1)

    return registry


def submitted(api: ApiClient, task: str) -> str:
    reply = api.post("/jobs", {"task": task, "payload": {"n": 1}}, tenant="acme")
    assert reply.status == 201, reply.body
    job_id: str = reply.body["job_id"]
    return job_id


def test_a_long_poll_answers_as_soon_as_the_job_finishes(
        app: Leasehold, tasks: TaskRegistry, clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    api = ApiClient(app)
    job_id = submitted(api, "echo")
    sleeps: list[float] = []
    advance = clock.sleep

    def sleep(seconds: float) -> None:  # the job finishes during the poll's third pause
        sleeps.append(seconds)
        advance(seconds)
        if len(sleeps) == 3:
            deliver(app)

    monkeypatch.setattr(clock, "sleep", sleep)
    started = clock.now_ms()
    reply = api.get(f"/jobs/{job_id}?wait_seconds=20", tenant="acme")
    assert reply.status == 200 and reply.body["state"] == "SUCCEEDED"
    assert reply.body["result"] == {"n": 1}
    assert len(sleeps) == 3 and clock.now_ms() - started < 1000  # not the 20 s asked for


def test_a_long_poll_on_an_unfinished_job_answers_after_its_wait(
        app: Leasehold, tasks: TaskRegistry, clock: FakeClock) -> None:
    api = ApiClient(app)
    job_id = submitted(api, "echo")
    started = clock.now_ms()
    reply = api.get(f"/jobs/{job_id}?wait_seconds=5", tenant="acme")
    assert reply.body["state"] == "QUEUED"
    assert 5000 <= clock.now_ms() - started < 5600
    # A finished job, another tenant's job and an unknown job answer at once.
    deliver(app)
    at = clock.now_ms()
    assert api.get(f"/jobs/{job_id}?wait_seconds=20", tenant="acme").body["state"] == \
        "SUCCEEDED"
    assert api.get(f"/jobs/{job_id}?wait_seconds=20", tenant="other").status == 404
    assert clock.now_ms() == at


@pytest.mark.parametrize("wait", ["21", "-1", "soon"])
def test_a_wait_past_api_gateways_limit_or_not_a_number_is_refused(
        app: Leasehold, tasks: TaskRegistry, wait: str) -> None:
    api = ApiClient(app)
    job_id = submitted(api, "echo")
    reply = api.get(f"/jobs/{job_id}?wait_seconds={wait}", tenant="acme")
    assert reply.status == 422 and reply.body["error"]["field"] == "wait_seconds"


def test_a_result_over_its_limit_fails_the_job_at_once_as_payload_too_large(
        app: Leasehold, tasks: TaskRegistry) -> None:
    api = ApiClient(app)
    job_id = submitted(api, "huge")
    deliver(app)
    job = api.get(f"/jobs/{job_id}", tenant="acme").body
    assert job["state"] == "DEAD" and job["attempts"] == 1  # never retried
    assert job["error"]["type"] == "PayloadTooLarge"
    assert f"the limit is {MAX_RESULT_BYTES}" in job["error"]["message"]
