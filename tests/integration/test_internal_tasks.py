"""Leasehold's own tasks (``leasehold.bulk``) are refused on every way a job is made
(issue 29, 13): ``POST /jobs`` took ``leasehold.bulk`` with any payload, which failed with
``KeyError`` 100 times over about 3 hours, holding a live slot all along. The bulk task now
says its payload is unfit with :class:`leasehold.InvalidPayload` (never retried)."""

from __future__ import annotations

from typing import Any

import pytest

import leasehold
from leasehold.bulk import run
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import NonRetryableError, ValidationError
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.streams.enqueue import enqueue_item

from .api_client import ApiClient
from .helpers import deliver

BULK = {"task": run.TASK, "payload": {"nonsense": True}}


@pytest.fixture
def api(app: Leasehold, registry: TaskRegistry) -> ApiClient:
    registry.task("work")(lambda payload, ctx: payload)
    return ApiClient(app)


@pytest.mark.parametrize(("path", "body"), [
    ("/jobs", BULK),
    ("/schedules", {"cron": "@daily", **BULK}),
    ("/triggers", {"pattern": {"source": ["shop"]}, **BULK}),
    ("/workflows", {"steps": [{"id": "a", "task": "work"}, {"id": "b", **BULK}]}),
])
def test_an_internal_task_is_refused_at_submission_on_every_route(
        api: ApiClient, path: str, body: dict[str, Any]) -> None:
    refused = api.post(path, body, tenant="acme")
    assert refused.status == 422, refused.body
    assert "internal to Leasehold" in refused.body["error"]["message"], refused.body
    assert api.get("/jobs", tenant="acme").body["jobs"] == []
    assert api.get("/schedules", tenant="acme").body["schedules"] == []


def test_enqueue_item_refuses_an_internal_task(api: ApiClient) -> None:
    with pytest.raises(ValidationError, match="internal to Leasehold"):
        enqueue_item(api.app, run.TASK, {"action": "delete", "filter": {}}, tenant="acme")


def test_a_task_cannot_take_an_internal_name(registry: TaskRegistry) -> None:
    with pytest.raises(ValidationError, match="Leasehold's own"):
        registry.task("leasehold.mine")(lambda payload, ctx: None)


def test_a_bulk_job_with_a_bad_payload_ends_dead_at_once_with_invalid_payload(
        api: ApiClient) -> None:
    app = api.app
    assert issubclass(leasehold.InvalidPayload, NonRetryableError)
    job = submit(app, JobSpec(task=run.TASK, tenant="acme", payload={"nonsense": True}),
                 internal=True).job
    deliver(app)
    dead = app.store.get(job.job_id)
    assert dead.state is JobState.DEAD and dead.attempt == 1, dead.history
    assert dead.error is not None and dead.error.type == "InvalidPayload"
    assert "'action'" in dead.error.message
