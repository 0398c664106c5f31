"""DynamoDB throttling and lost responses: retried, nothing lost, nothing doubled."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from leasehold.core.context import JobContext
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import StaleMessage
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change
from leasehold.lifecycle.submission import submit

from .helpers import deliver

# The DynamoDB semantics these tests rely on hold on AWS's DynamoDB Local too (issue 19).
pytestmark = pytest.mark.ddblocal


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Any:
        yield self._data


def kind_of(body: dict[str, Any]) -> str:
    values = body.get("ExpressionAttributeValues", {})
    if "list_append" in body.get("UpdateExpression", ""):
        return "lease"
    if ":source" in values:
        return "finish"
    return "heartbeat"


def test_throttled_lease_heartbeat_and_finish_are_retried_and_nothing_is_doubled(
    app: Leasehold, registry: TaskRegistry
) -> None:
    runs = []

    @registry.task("report")
    def report(payload: Any, ctx: JobContext) -> Any:
        runs.append(ctx.attempt)
        ctx.heartbeat({"done": 50})
        return "ok"

    throttled: Counter[str] = Counter()

    def throttle(request: Any, **_: Any) -> AWSResponse | None:
        kind = kind_of(json.loads(request.body))
        if throttled[kind] >= 1:
            return None  # let the request through to DynamoDB (moto)
        throttled[kind] += 1
        error = {"__type": "com.amazonaws.dynamodb.v20120810#"
                 "ProvisionedThroughputExceededException",
                 "message": "The level of configured provisioned throughput was exceeded"}
        return AWSResponse(request.url, 400, {}, _Body(json.dumps(error).encode()))

    job = submit(app, JobSpec(task="report")).job
    # Registered first, so it answers before moto's own stubber does.
    app.clients.dynamodb.meta.events.register_first(
        "before-send.dynamodb.UpdateItem", throttle)
    assert deliver(app) == 1
    assert throttled == {"lease": 1, "heartbeat": 1, "finish": 1}
    done = app.store.get(job.job_id)
    assert (done.state, done.attempt, done.result) == (JobState.SUCCEEDED, 1, "ok")
    assert json.loads(done.progress_json or "null") == {"done": 50}
    assert runs == [1]
    assert [t.target for t in done.history] == ["QUEUED", "RUNNING", "SUCCEEDED"]


def test_a_transition_whose_response_was_lost_is_recognised_when_retried(
    app: Leasehold, registry: TaskRegistry
) -> None:
    registry.task("echo")(lambda payload, ctx: payload)
    job = submit(app, JobSpec(task="echo")).job
    now = app.now()
    leased = app.store.lease(job.job_id, job.epoch, owner="w:1", expires_at=now + 30_000,
                             now=now, actor="w")
    # The same lease request again (as a retry after a lost response): it is ours.
    again = app.store.lease(job.job_id, job.epoch, owner="w:1", expires_at=now + 30_000,
                            now=now, actor="w")
    assert again.lease_owner == "w:1" and again.attempt == 1
    # Anyone else's lease on the same message is stale.
    try:
        app.store.lease(job.job_id, job.epoch, owner="w:2", expires_at=now + 30_000, now=now,
                        actor="other")
        raise AssertionError("a second lease succeeded")
    except StaleMessage:
        pass
    finish = Change(target=JobState.SUCCEEDED, actor="w", owner="w:1",
                    set={"result": '"r"', "finished_at": now})
    first = app.store.transition(leased, finish, now=now)
    second = app.store.transition(leased, finish, now=now)  # retried with the same request
    assert first.state is second.state is JobState.SUCCEEDED
    stored = app.store.get(job.job_id)
    assert [t.target for t in stored.history].count("SUCCEEDED") == 1
