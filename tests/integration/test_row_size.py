"""A job that uses no option keeps its row under 1 KB through its life (issue 32), so its
lease and its finish each cost one write unit (DynamoDB charges the larger of the item's
sizes before and after a write, per started KB). Sizes are DynamoDB's rules
(``bench.metering.item_size``), read from the stored item after every state change."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from bench.metering import item_size
from leasehold.aws.definitions import job_key
from leasehold.core.jobs import Job
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Worker

from .helpers import deliver

KB = 1024
VERSION = "3f9a1c2b7d4e"  # a deployed code version: the bundle hash's 12 hex digits


@pytest.mark.parametrize("payload", [None, {"order": 12345, "items": ["a", "b"]}])
def test_a_job_without_options_keeps_its_row_under_one_kb_at_every_transition(
        app: Leasehold, registry: TaskRegistry, payload: Any) -> None:
    registry.task("echo")(lambda payload, ctx: payload)
    # A deployed worker's code version (the bundle's hash): on the row and the lease's entry.
    app.settings = dataclasses.replace(app.settings, code_version=VERSION)
    sizes: list[tuple[str, int]] = []
    items: list[dict[str, Any]] = []

    def measure(job: Job, source: JobState | None) -> None:
        item = app.clients.dynamodb.get_item(
            TableName=app.settings.jobs_table, Key=job_key(job.job_id),
            ConsistentRead=True)["Item"]
        sizes.append((job.state.value, item_size(item)))
        items.append(item)

    app.store.observers.append(measure)
    submit(app, JobSpec(task="echo", payload=payload))
    assert deliver(app, Worker(app, worker_id="ip-10-0-12-34.ec2.internal:12345:" + "f" * 8)) == 1
    assert [state for state, _ in sizes] == ["QUEUED", "RUNNING", "SUCCEEDED"]
    assert all(size < KB for _, size in sizes), sizes
    assert items[-1]["code_version"] == {"S": VERSION}
