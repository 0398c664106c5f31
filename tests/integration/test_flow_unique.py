"""Unique jobs: while a job with key K is live, a submission with K answers it; the claim
commits with the job's row and goes with the transition that ends it, under faults."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.aws.faults import Fault
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import Conflict, ValidationError
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.tenancy.admission import Limits, retry_admitted, submit_admitted
from leasehold.tenancy.listing import list_jobs

from .flow_helpers import flow_item
from .helpers import deliver, inject, lost_past_retries, receive_all, tenant_live

# moto only: the idempotency semantics DynamoDB Local adds are exercised by the state machine.


@pytest.fixture(autouse=True)
def tasks(registry: TaskRegistry) -> None:
    registry.task("sync", unique={"key": "sync:{payload.account}"})(lambda p, ctx: p)
    registry.task("echo")(lambda p, ctx: p)


def job_ids(app: Leasehold, tenant: str = "default") -> list[str]:
    return [job.job_id for job in list_jobs(app, tenant, limit=100)[0]]


def test_a_second_submission_while_the_first_is_live_answers_it_as_a_duplicate(
    app: Leasehold,
) -> None:
    first = submit(app, JobSpec(task="sync", payload={"account": "a1", "n": 1}))
    again = submit(app, JobSpec(task="sync", payload={"account": "a1", "n": 2}))
    other = submit(app, JobSpec(task="sync", payload={"account": "a2"}))
    assert first.created and not first.duplicate
    assert (again.created, again.duplicate, again.job.job_id) == (False, True, first.job.job_id)
    assert other.created and other.job.job_id != first.job.job_id
    assert sorted(job_ids(app)) == sorted([first.job.job_id, other.job.job_id])
    assert len(receive_all(app)) == 2  # the duplicate sent nothing
    # Keys are scoped to the tenant: another tenant's equal key is its own.
    assert submit(app, JobSpec(task="sync", tenant="acme", payload={"account": "a1"})).created


def test_unlike_an_idempotency_key_the_key_is_free_once_the_job_ended_even_if_a_response_is_lost(
    app: Leasehold,
) -> None:
    first = submit(app, JobSpec(task="sync", payload={"account": "a1"}))
    deliver(app)
    assert app.store.get(first.job.job_id).state is JobState.SUCCEEDED
    assert flow_item(app, "default", "unique", "sync:a1") is None  # gone with the job
    second = submit(app, JobSpec(task="sync", payload={"account": "a1"}))
    assert second.created and second.job.job_id != first.job.job_id
    # The claim goes with the end even when that transaction's response is lost.
    inject(app, Fault(target="dynamodb.TransactWriteItems", kind="lose"))
    control.cancel(app, second.job.job_id)
    assert app.store.get(second.job.job_id).state is JobState.CANCELLED
    assert flow_item(app, "default", "unique", "sync:a1") is None
    assert submit(app, JobSpec(task="sync", payload={"account": "a1"})).created


def test_a_job_option_overrides_the_task_default_and_a_missing_field_is_refused(
    app: Leasehold,
) -> None:
    mine = submit(app, JobSpec(task="echo", payload={}, unique={"key": "fixed"}))
    dup = submit(app, JobSpec(task="sync", payload={"account": "z"}, unique={"key": "fixed"}))
    assert dup.duplicate and dup.job.job_id == mine.job.job_id
    with pytest.raises(ValidationError, match=r"the payload has no field 'account'"):
        submit(app, JobSpec(task="sync", payload={"acct": "a1"}))
    with pytest.raises(ValidationError, match="unique"):
        submit(app, JobSpec(task="echo", unique={"key": "k", "limit": 2}))
    assert job_ids(app) == [mine.job.job_id]  # the refusals wrote nothing


def test_two_racing_submissions_make_one_job(
    app: Leasehold, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fixed interleaving: the rival runs to the end between our read and our write."""
    original = app.store.create
    rivals: list[Any] = []

    def rival_first(job: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(app.store, "create", original)
        rivals.append(submit(app, JobSpec(task="sync", payload={"account": "a1", "by": 2})))
        return original(job, **kwargs)

    monkeypatch.setattr(app.store, "create", rival_first)
    mine = submit(app, JobSpec(task="sync", payload={"account": "a1", "by": 1}))
    [rival] = rivals
    assert rival.created and mine.duplicate and mine.job.job_id == rival.job.job_id
    assert job_ids(app) == [rival.job.job_id]
    assert len(receive_all(app)) == 1


def test_a_lost_response_on_the_claim_makes_one_job(app: Leasehold) -> None:
    inject(app, Fault(target="dynamodb.TransactWriteItems", kind="lose"))
    first = submit(app, JobSpec(task="sync", payload={"account": "a1"}))
    assert first.created  # botocore's retry met its own write
    lost_past_retries(app, "dynamodb.TransactWriteItems")
    with pytest.raises(Exception):  # noqa: B017 - the caller sees an error; the write landed
        submit(app, JobSpec(task="sync", payload={"account": "a2"}))
    retried = submit(app, JobSpec(task="sync", payload={"account": "a2"}))
    assert retried.duplicate  # the caller's retry is answered with the job that landed
    assert len(job_ids(app)) == 2
    assert flow_item(app, "default", "unique", "sync:a2")["job_id"] == retried.job.job_id  # type: ignore[index]


def test_a_duplicate_spends_no_slot_of_its_tenant(app: Leasehold) -> None:
    limits = Limits(rate=100, burst=100, max_live=5)
    first = submit_admitted(app, JobSpec(task="sync", tenant="acme", payload={"account": "a"}),
                            "default", limits)
    for _ in range(3):
        again = submit_admitted(
            app, JobSpec(task="sync", tenant="acme", payload={"account": "a"}), "default",
            limits)
        assert again.duplicate and again.job.job_id == first.job.job_id
    assert tenant_live(app, "acme") == 1
    deliver(app)
    assert tenant_live(app, "acme") == 0


def test_a_manual_retry_takes_the_claim_back_and_is_refused_while_another_holds_it(
    app: Leasehold,
) -> None:
    limits = Limits(rate=100, burst=100, max_live=5)
    first = submit_admitted(app, JobSpec(task="sync", tenant="acme", payload={"account": "a"}),
                            "default", limits).job
    control.cancel(app, first.job_id)
    second = submit_admitted(app, JobSpec(task="sync", tenant="acme", payload={"account": "a"}),
                             "default", limits).job
    with pytest.raises(Conflict):
        retry_admitted(app, first.job_id, "acme", limits)
    assert app.store.get(first.job_id).state is JobState.CANCELLED
    control.cancel(app, second.job_id)
    retried = retry_admitted(app, first.job_id, "acme", limits)
    assert retried.state is JobState.QUEUED
    assert flow_item(app, "default", "unique", "sync:a") is None
    assert flow_item(app, "acme", "unique", "sync:a")["job_id"] == first.job_id  # type: ignore[index]
    assert submit(app, JobSpec(task="sync", tenant="acme", payload={"account": "a"})).duplicate
    deliver(app)
    assert flow_item(app, "acme", "unique", "sync:a") is None
    assert tenant_live(app, "acme") == 0


def test_the_api_answers_a_duplicate_200_and_a_key_naming_a_missing_field_422(
    app: Leasehold, clock: Any,
) -> None:
    from .api_client import ApiClient

    api = ApiClient(app)
    body = {"task": "echo", "payload": {"file": "a.csv"},
            "unique": {"key": "import:{payload.file}"}, "start_within_seconds": 5}
    first, again = api.post("/jobs", body), api.post("/jobs", body)
    assert (first.status, again.status) == (201, 200)
    assert again.body["duplicate"] and again.body["job_id"] == first.body["job_id"]
    missing = api.post("/jobs", {**body, "payload": {}})
    assert missing.status == 422 and "payload.file" in missing.body["error"]["message"]
    clock.advance(6)
    deliver(app)
    assert api.get(f"/jobs/{first.body['job_id']}").body["state"] == "EXPIRED"
    assert api.post("/jobs", body).status == 201  # the key is free again
