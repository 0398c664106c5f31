from __future__ import annotations

from typing import Any

import pytest

from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import MAX_PAYLOAD_BYTES, JobSpec
from leasehold.core.states import JobState
from leasehold.errors import IdempotencyConflict, PayloadTooLarge, ValidationError
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.tenancy.listing import list_jobs

from .helpers import receive_all

# The DynamoDB semantics these tests rely on hold on AWS's DynamoDB Local too (issue 19).
pytestmark = pytest.mark.ddblocal


@pytest.fixture(autouse=True)
def tasks(registry: TaskRegistry) -> None:
    registry.task("echo")(lambda payload, ctx: payload)


def all_job_ids(app: Leasehold, tenant: str = "default") -> list[str]:
    jobs, _ = list_jobs(app, tenant, limit=100)
    return [job.job_id for job in jobs]


def test_an_idempotent_replay_returns_the_same_job_without_a_second_message(
    app: Leasehold,
) -> None:
    first = submit(app, JobSpec(task="echo", payload={"n": 1}, idempotency_key="order-42"))
    again = submit(app, JobSpec(task="echo", payload={"n": 1}, idempotency_key="order-42"))
    assert (first.created, again.created) == (True, False)
    assert first.job.job_id == again.job.job_id
    assert all_job_ids(app) == [first.job.job_id]
    assert len(receive_all(app)) == 1


def test_the_same_key_with_another_payload_is_a_conflict_and_writes_nothing(
    app: Leasehold,
) -> None:
    first = submit(app, JobSpec(task="echo", payload={"n": 1}, idempotency_key="order-42"))
    with pytest.raises(IdempotencyConflict) as info:
        submit(app, JobSpec(task="echo", payload={"n": 2}, idempotency_key="order-42"))
    assert info.value.context["job_id"] == first.job.job_id
    assert app.store.get(first.job.job_id).payload == {"n": 1}
    assert len(receive_all(app)) == 1


def test_keys_are_per_tenant(app: Leasehold) -> None:
    a = submit(app, JobSpec(task="echo", tenant="acme", idempotency_key="k"))
    b = submit(app, JobSpec(task="echo", tenant="globex", idempotency_key="k"))
    assert a.created and b.created and a.job.job_id != b.job.job_id


def test_concurrent_replays_produce_exactly_one_job_and_no_orphan(
    app: Leasehold, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fixed interleaving: replay B runs to the end between A's validation and A's put."""
    spec = JobSpec(task="echo", payload="same", idempotency_key="race")
    original = app.store.create
    results: list[Any] = []

    def create_after_rival(job: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(app.store, "create", original)
        results.append(submit(app, spec))  # the rival wins the put
        return original(job, **kwargs)

    monkeypatch.setattr(app.store, "create", create_after_rival)
    mine = submit(app, spec)
    [rival] = results
    assert (rival.created, mine.created) == (True, False)
    assert rival.job.job_id == mine.job.job_id
    assert all_job_ids(app) == [mine.job.job_id]
    assert len(receive_all(app)) == 1  # one hand-off: the loser sent nothing


def test_invalid_and_oversized_submissions_write_nothing(app: Leasehold) -> None:
    with pytest.raises(PayloadTooLarge):
        submit(app, JobSpec(task="echo", payload="x" * MAX_PAYLOAD_BYTES))
    with pytest.raises(ValidationError):
        submit(app, JobSpec(task="unknown"))
    assert all_job_ids(app) == []
    assert receive_all(app) == []


def test_a_job_due_beyond_the_sqs_delay_limit_is_stored_scheduled(app: Leasehold) -> None:
    later = submit(app, JobSpec(task="echo", delay_seconds=3600)).job
    soon = submit(app, JobSpec(task="echo", delay_seconds=1)).job
    assert (later.state, later.epoch) == (JobState.SCHEDULED, 0)
    assert soon.state is JobState.QUEUED
    assert app.store.due(0, app.now() + 3_600_000, 10) + app.store.due(
        1, app.now() + 3_600_000, 10) + app.store.due(2, app.now() + 3_600_000, 10) + \
        app.store.due(3, app.now() + 3_600_000, 10) == [later.job_id]


def test_internal_jobs_hold_no_tenant_slot_and_cost_no_counter_writes(
    app: Leasehold,
) -> None:
    from .helpers import deliver

    job = submit(app, JobSpec(task="echo", tenant="acme")).job
    deliver(app)
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    tenant_item = app.clients.dynamodb.get_item(
        TableName=app.settings.tenants_table, Key={"tenant": {"S": "acme"}})
    assert "Item" not in tenant_item


def test_a_counted_job_gives_its_slot_back_once_when_it_finishes(app: Leasehold) -> None:
    from leasehold.tenancy.admission import Limits, submit_admitted
    from leasehold.tenancy.counters import counts

    from .helpers import deliver

    job = submit_admitted(app, JobSpec(task="echo", tenant="acme"), "default", Limits()).job
    assert counts(app, "acme")[1] == 1
    deliver(app)
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    by_state, live = counts(app, "acme")
    assert (live, by_state["SUCCEEDED"]) == (0, 1)
