"""Outcome counts of jobs the API did not admit (``/stats``): exact totals, written once per
worker batch (one ``ADD`` per tenant, not one per job), at once outside a batch,
and a failed count write never fails or re-runs a job."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from leasehold.aws.faults import Fault, FaultInjector
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.control import cancel
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Worker
from leasehold.tenancy.counters import counts
from tests.conftest import MakeApp
from tests.integration.helpers import TenantItemWrites, deliver

# The DynamoDB semantics these tests rely on hold on AWS's DynamoDB Local too (issue 19).
pytestmark = pytest.mark.ddblocal

UPDATE = "dynamodb.UpdateItem"



@pytest.fixture
def app(make_app: MakeApp, registry: TaskRegistry) -> Leasehold:
    registry.task("ok")(lambda payload, ctx: payload)

    def boom(payload: Any, ctx: Any) -> None:
        raise ValueError("no")

    registry.task("boom")(boom)
    return make_app()


def _consume_one_batch(app: Leasehold, worker: Worker | None = None) -> dict[str, int]:
    batch = app.queues.receive(app.queues.url("default", "normal"), max_messages=10)
    return consume(worker or Worker(app), batch)


def test_a_worker_batch_counts_its_outcomes_in_one_write_per_tenant(
        app: Leasehold) -> None:
    writes = TenantItemWrites(app, figures=False)
    for n in range(8):
        submit(app, JobSpec(task="ok", tenant="acme", payload=n))
    for n in range(2):
        submit(app, JobSpec(task="boom", tenant="acme", payload=n, max_attempts=1))
    for n in range(3):
        submit(app, JobSpec(task="ok", tenant="other", payload=n))
    url = app.queues.url("default", "normal")
    seen = 0
    while batch := app.queues.receive(url, max_messages=10):
        tenants = {message.group for message in batch}  # the hand-off's group is the tenant
        assert consume(Worker(app), batch) == {"processed": len(batch), "failed": 0}
        # Each batch writes each of its tenants' counts once (never one write per job).
        assert sorted(item.split("#")[0] for item in writes.items[seen:]) == sorted(tenants)
        seen = len(writes.items)
    assert seen < 13
    by_state, _ = counts(app, "acme")
    assert (by_state["SUCCEEDED"], by_state["DEAD"]) == (8, 2)
    assert counts(app, "other")[0]["SUCCEEDED"] == 3


def test_outside_a_batch_an_outcome_is_counted_at_once(app: Leasehold) -> None:
    job = submit(app, JobSpec(task="ok", tenant="acme")).job
    writes = TenantItemWrites(app, figures=False)
    cancel(app, job.job_id)  # a QUEUED job cancelled through the API: no batch around it
    assert len(writes.items) == 1
    assert counts(app, "acme")[0]["CANCELLED"] == 1


def test_a_count_that_cannot_be_written_fails_no_job(app: Leasehold) -> None:
    runs: Counter[int] = Counter()
    app.registry.task("counted")(lambda payload, ctx: runs.update([payload]))
    jobs = [submit(app, JobSpec(task="counted", tenant="acme", payload=n)).job.job_id
            for n in range(5)]
    worker = Worker(app)
    writes = TenantItemWrites(app, figures=False)
    # Every tenants-table write fails past botocore's retries (the job rows' writes do not).
    injector = FaultInjector([Fault(target=UPDATE, kind="fail", times=None,
                                    when=lambda params: params.get("TableName") ==
                                    app.settings.tenants_table)])
    injector.install(app.clients.dynamodb)
    assert _consume_one_batch(app, worker) == {"processed": 5, "failed": 0}
    assert writes.items  # it tried
    assert all(app.store.get(job).state is JobState.SUCCEEDED for job in jobs)
    assert deliver(app, worker) == 0 and runs == Counter(range(5))
