"""The liveness check itself (tests/integration/liveness.py): it names each live job's ways
to wake, and fails on a job that has none."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.aws.definitions import job_key
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit

from .helpers import receive_all, submit_swept
from .liveness import assert_every_live_job_can_wake, messages_in_queues


def test_a_live_job_with_no_index_entry_and_no_message_fails_the_check(
        app: Leasehold, registry: TaskRegistry) -> None:
    registry.task("echo")(lambda payload, ctx: payload)
    queued = submit_swept(app, JobSpec(task="echo", payload=1)).job
    later = submit(app, JobSpec(task="echo", payload=2, delay_seconds=3600)).job
    paths = assert_every_live_job_can_wake(app, in_flight=messages_in_queues(app))
    assert {p.kind for p in paths[queued.job_id]} == {"message", "sweep"}
    assert {p.kind for p in paths[later.job_id]} == {"due"}
    # A row whose message is gone and whose sweep entry was dropped (a store that forgot
    # its index keys) is stranded: the check names it.
    for message in receive_all(app):
        app.queues.delete(message.queue_url, [message.receipt_handle])
    drop(app, queued.job_id, "sweep_shard, sweep_at")
    with pytest.raises(AssertionError, match=f"job {queued.job_id} .* no way to wake"):
        assert_every_live_job_can_wake(app, in_flight=messages_in_queues(app))


def drop(app: Leasehold, job_id: str, attributes: str) -> Any:
    return app.clients.dynamodb.update_item(
        TableName=app.settings.jobs_table, Key=job_key(job_id),
        UpdateExpression=f"REMOVE {attributes}")
