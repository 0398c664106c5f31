"""What one job costs in AWS requests, by operation (issue 21: ≤ 5 per job via the API).

Each test counts the requests of one job's life through the API and pins one that was
removed: the read after the finish, the backlog look of every submission that
arrives while another one is asking SQS, the task figures' day list written at every batch.
"""

from __future__ import annotations

from typing import Any

from leasehold.aws.counting import RequestCounter
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.metrics import figures
from leasehold.polling.poller import PollerOptions, PollingWorker

from .api_client import api_for


def test_a_capped_job_is_finished_without_a_transaction_and_not_read_back(
        app: Leasehold, registry: TaskRegistry) -> None:
    registry.task("echo")(lambda payload, ctx: payload)
    api = api_for(app)
    counter = RequestCounter().attach(app.clients)
    reply = api.post("/jobs", {"task": "echo", "payload": {"n": 1}}, tenant="acme")
    assert reply.status == 201, reply
    admitted = counter.snapshot()
    assert PollingWorker(app, PollerOptions(batch_size=1)).poll_once() == 1
    finished = counter.snapshot().minus(admitted)
    # The finish is one conditional update whose conditions pin the row (state and epoch),
    # so the finished job is built from what was known, not read; its tenant's slot goes
    # back by an update of its own after it (issue 46: no transaction, default cap).
    assert finished.requests["dynamodb.TransactWriteItems"] == 0, finished
    assert finished.requests["dynamodb.GetItem"] == 0, finished
    done = app.store.get(reply.body["job_id"])
    assert done.state.value == "SUCCEEDED"
    assert done.result == {"n": 1}



def test_a_task_is_added_to_its_tenants_day_list_once_a_day_not_once_a_batch(
        app: Leasehold, registry: TaskRegistry) -> None:
    registry.task("echo")(lambda payload, ctx: payload)
    listed: list[str] = []

    def seen(params: dict[str, Any], **_: Any) -> None:
        key = params["Key"].get("tenant", {}).get("S", "")
        if "#tasks#" in key:
            listed.append(key)

    app.clients.dynamodb.meta.events.register("before-parameter-build.dynamodb.UpdateItem",
                                              seen)
    worker = PollingWorker(app, PollerOptions(batch_size=1))
    for _ in range(3):  # three batches of one job each, one task, one day
        submit(app, JobSpec(task="echo", tenant="acme"))
        assert worker.poll_once() == 1
    assert len(listed) == 1, listed
    submit(app, JobSpec(task="echo", tenant="other"))  # another tenant's list is its own
    assert worker.poll_once() == 1
    assert len(listed) == 2 and listed[1].startswith("other#"), listed
    [task] = figures.read(app, "acme", app.now())["tasks"]
    assert task["task"] == "echo" and task["hour"]["succeeded"] == 3
