"""A Lambda worker and its function timeout: no job is started that cannot finish in time.

Records of a batch run one after another; a job that runs into the function timeout dies
with its invocation (a crash: three make it DEAD) and the rest of the batch waits out the
visibility timeout. These tests drive the consumer with the event and context Lambda gives.
"""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.aws.queues import Received
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import FINISH_SECONDS, Batch, as_event, process_event
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Worker
from tests.conftest import MakeApp

from .api_client import ApiClient


class Context:
    """A Lambda context whose invocation has ``seconds`` left, for as long as the test runs."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def get_remaining_time_in_millis(self) -> int:
        return int(self.seconds * 1000)


@pytest.fixture
def tasks(registry: TaskRegistry) -> TaskRegistry:
    @registry.task("echo")
    def echo(payload: Any, ctx: Any) -> Any:
        return payload

    return registry


def _queue_url(app: Leasehold) -> str:
    return app.queues.url("default", "normal")


def _receive(app: Leasehold, visibility: int | None = None) -> list[Received]:
    return app.queues.receive(_queue_url(app), max_messages=10, visibility_seconds=visibility)


def _visible(app: Leasehold) -> int:
    attributes = app.clients.sqs.get_queue_attributes(
        QueueUrl=_queue_url(app), AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


def _event(messages: list[Received]) -> dict[str, Any]:
    name = _queue_url_name(messages[0].queue_url)
    return as_event(messages, f"arn:aws:sqs:us-east-1:123456789012:{name}")


def _queue_url_name(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def test_a_timeout_longer_than_the_lambda_pools_function_allows_is_refused_naming_the_field(
        make_app: MakeApp, tasks: TaskRegistry) -> None:
    app = make_app(pool_timeouts={"default": 60.0})
    api = ApiClient(app)
    refused = api.post("/jobs", {"task": "echo", "timeout_seconds": 55})
    assert refused.status == 422, refused.body
    assert refused.body["error"]["field"] == "timeout_seconds"
    assert "60" in refused.body["error"]["message"]
    assert _visible(app) == 0  # nothing written, nothing sent
    assert api.post("/jobs", {"task": "echo", "timeout_seconds": 50}).status == 201


def test_workflow_steps_schedules_and_triggers_are_held_to_the_same_limit(
        make_app: MakeApp, tasks: TaskRegistry) -> None:
    api = ApiClient(make_app(pool_timeouts={"default": 60.0}))
    step = api.post("/workflows", {"steps": [{"id": "a", "task": "echo", "timeout_seconds": 55}]})
    # One rule on every route: an invalid value is a 422 naming the field.
    assert (step.status, step.body["error"]["field"]) == (422, "steps[0].timeout_seconds")
    schedule = api.post("/schedules", {"cron": "0 * * * *", "task": "echo",
                                       "timeout_seconds": 55})
    assert (schedule.status, schedule.body["error"]["field"]) == (422, "timeout_seconds")
    fired = api.post("/schedules", {"cron": "0 * * * *", "workflow": {
        "steps": [{"id": "a", "task": "echo", "timeout_seconds": 55}]}})
    assert (fired.status, fired.body["error"]["field"]) == (
        422, "workflow.steps[0].timeout_seconds")
    trigger = api.post("/triggers", {"pattern": {"source": ["shop"]}, "task": "echo",
                                     "timeout_seconds": 55})
    assert (trigger.status, trigger.body["error"]["field"]) == (422, "timeout_seconds")


def test_a_job_that_cannot_finish_in_the_time_left_is_handed_back_unstarted(
        app: Leasehold, tasks: TaskRegistry) -> None:
    short = submit(app, JobSpec(task="echo", payload=1, timeout_seconds=20)).job
    long = submit(app, JobSpec(task="echo", payload=2, timeout_seconds=40)).job
    messages = sorted(_receive(app), key=lambda m: long.job_id in m.body)  # short first
    assert len(messages) == 2
    # 30 s left: the 20 s job fits (with what finishing needs), the 40 s job does not.
    assert 20 + FINISH_SECONDS <= 30 < 40 + FINISH_SECONDS
    response = process_event(Worker(app), _event(messages), Context(30))

    failed = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
    (long_message,) = [m for m in messages if long.job_id in m.body]
    assert failed == {long_message.message_id}
    assert app.store.get(short.job_id).state is JobState.SUCCEEDED
    untouched = app.store.get(long.job_id)
    assert (untouched.state, untouched.attempt, untouched.crash_count) == (JobState.QUEUED, 0, 0)
    # Visible again at once for an invocation with time to run it, not after 6 x timeout.
    (again,) = _receive(app)
    assert long.job_id in again.body


def test_the_first_record_always_runs_so_a_job_that_fits_no_invocation_does_not_churn(
        app: Leasehold, tasks: TaskRegistry) -> None:
    """A job from before the submit-time limit: handing it back forever would help no one."""
    job = submit(app, JobSpec(task="echo", payload=3, timeout_seconds=600)).job
    response = process_event(Worker(app), _event(_receive(app)), Context(300))
    assert response["batchItemFailures"] == []
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED


def test_heartbeats_keep_the_rest_of_the_batch_invisible_while_a_job_runs(
        app: Leasehold, registry: TaskRegistry) -> None:
    seen: list[int] = []

    @registry.task("beats")
    def beats(payload: Any, ctx: Any) -> Any:
        ctx.heartbeat()
        seen.append(_visible(app))
        return payload

    for n in range(2):
        submit(app, JobSpec(task="beats", payload=n, timeout_seconds=20))
    # Received with no visibility at all: only the heartbeats hide them.
    messages = _receive(app, visibility=0)
    assert len(messages) == 2
    process_event(Worker(app), _event(messages), Context(300))
    # While the first job ran, neither it nor the second was visible to another worker.
    assert seen[0] == 0


def test_a_heartbeat_never_shrinks_visibility_below_what_the_invocation_needs(
        app: Leasehold) -> None:
    lease = app.settings.lease_seconds
    in_lambda = Batch(Worker(app), [], Context(600))
    assert in_lambda.hold_seconds() >= 600 + FINISH_SECONDS > 2 * lease
    polling = Batch(Worker(app), [])  # no deadline: two leases, as before
    assert polling.hold_seconds() == 2 * lease
