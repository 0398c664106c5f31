"""A delete never removes a row something still references (issue 29, 10).

A bulk delete deleted a FAILED workflow's DEAD step; the workflow's retry then ran the step's
dependent as a root, which SUCCEEDED without its dependency. Every delete of a job row goes
through ``lifecycle.deletion``: the workflows' guard keeps a step while its workflow exists,
the durable guard keeps a child while its parent is live, and the bulk job and its dry run
count what they kept, by reason. A workflow retry that finds a step's row gone refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leasehold.aws.definitions import job_key
from leasehold.aws.faults import Fault, FaultInjector
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import NonRetryableError
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.tenancy.listing import JobFilter, list_jobs
from leasehold.time import ticker
from leasehold.workflows.progress import step_job_id

from .api_client import ApiClient
from .helpers import deliver
from .workflow_helpers import run_until_idle

CHAIN = {"name": "chain", "steps": [
    {"id": "a", "task": "ok", "payload": 1},
    {"id": "b", "task": "flaky", "depends_on": ["a"]},
    {"id": "c", "task": "ok", "depends_on": ["b"]},
    {"id": "x", "task": "ok", "payload": 2},
]}


@pytest.fixture
def api(app: Leasehold, registry: TaskRegistry) -> ApiClient:
    runs: dict[str, int] = {}

    @registry.task("ok")
    def ok(payload: Any, ctx: Any) -> Any:
        step = ctx.extra.get("step_id", "plain")
        runs[step] = runs.get(step, 0) + 1
        return payload

    @registry.task("flaky", max_attempts=1)
    def flaky(payload: Any, ctx: Any) -> Any:
        runs["b"] = runs.get("b", 0) + 1
        if runs["b"] == 1:
            raise NonRetryableError("the first run fails")
        return "fixed"

    client = ApiClient(app)
    client.runs = runs  # type: ignore[attr-defined]
    return client


def failed_workflow(api: ApiClient) -> str:
    wid: str = api.post("/workflows", CHAIN, tenant="acme").body["workflow_id"]
    run_until_idle(api.app)
    shown = api.get(f"/workflows/{wid}", tenant="acme").body
    assert shown["state"] == "FAILED"
    assert {s["id"]: s["state"] for s in shown["steps"]} == {
        "a": "SUCCEEDED", "b": "DEAD", "c": "CANCELLED", "x": "SUCCEEDED"}
    return wid


def plain_job(api: ApiClient) -> str:
    job_id: str = api.post("/jobs", {"task": "ok", "payload": 0}, tenant="acme").body["job_id"]
    deliver(api.app)
    assert api.app.store.get(job_id).state is JobState.SUCCEEDED
    return job_id


def rows(app: Leasehold, ids: list[str]) -> set[str]:
    return {job.job_id for job in app.store.batch_get(ids)}


def run_bulk(app: Leasehold, clock: FakeClock, bulk_id: str) -> None:
    for _ in range(10):
        deliver(app, once=True)
        if app.store.get(bulk_id).state is JobState.SUCCEEDED:
            return
        clock.advance(150)  # a failed attempt comes back after its backoff
        ticker.promote_due(app)
        sweeper.sweep(app)
    raise AssertionError(app.store.get(bulk_id).history)


def test_a_bulk_delete_keeps_a_failed_workflows_steps_and_says_why_and_the_retry_works(
        api: ApiClient, clock: FakeClock) -> None:
    app = api.app
    wid = failed_workflow(api)
    steps = [step_job_id(wid, s, "acme") for s in "abcx"]
    plain = plain_job(api)
    preview = api.post("/jobs/bulk", {"action": "delete", "dry_run": True}, tenant="acme").body
    assert (preview["matches"], preview["sample"]) == (1, [plain])
    assert (preview["skipped_referenced"], preview["referenced_by"]) == (4, {"workflow": 4})
    # The guard's read of the workflows fails (as a throttle does once botocore's retries
    # ran out): the attempt fails and deletes nothing (the guard fails closed), then the
    # job's retry does the work.
    injector = FaultInjector([Fault(
        target="dynamodb.BatchGetItem", kind="fail", times=1,
        when=lambda params: app.settings.workflows_table in params.get("RequestItems", {}))])
    injector.install(app.clients.dynamodb)
    bulk_id = api.post("/jobs/bulk", {"action": "delete"}, tenant="acme").body["bulk_id"]
    deliver(app, once=True)
    assert injector.injected[("dynamodb.BatchGetItem", "fail")] == 1
    assert app.store.get(bulk_id).state is not JobState.SUCCEEDED
    assert rows(app, [*steps, plain]) == {*steps, plain}  # nothing deleted
    run_bulk(app, clock, bulk_id)
    shown = api.get(f"/jobs/bulk/{bulk_id}", tenant="acme").body
    assert {k: shown["result"][k] for k in ("done", "skipped", "skipped_referenced",
                                            "referenced_by")} == {
        "done": 1, "skipped": 0, "skipped_referenced": 4, "referenced_by": {"workflow": 4}}
    assert rows(app, [*steps, plain]) == set(steps)  # only the plain job is gone
    retried = api.post(f"/workflows/{wid}/retry", tenant="acme")
    assert retried.status == 200, retried.body
    run_until_idle(app)
    assert api.get(f"/workflows/{wid}", tenant="acme").body["state"] == "SUCCEEDED"
    assert api.runs == {"a": 1, "b": 2, "c": 1, "x": 1, "plain": 1}  # type: ignore[attr-defined]


def test_the_steps_of_a_workflow_that_is_gone_are_deleted(api: ApiClient,
                                                          clock: FakeClock) -> None:
    app = api.app
    wid = failed_workflow(api)
    steps = [step_job_id(wid, s, "acme") for s in "abcx"]
    # As DynamoDB's TTL does, once the workflow's time is up: its row is gone.
    app.clients.dynamodb.delete_item(TableName=app.settings.workflows_table,
                                     Key={"workflow_id": {"S": wid}})
    preview = api.post("/jobs/bulk", {"action": "delete", "dry_run": True}, tenant="acme").body
    assert (preview["matches"], preview["skipped_referenced"]) == (4, 0)
    bulk_id = api.post("/jobs/bulk", {"action": "delete"}, tenant="acme").body["bulk_id"]
    run_bulk(app, clock, bulk_id)
    assert app.store.get(bulk_id).result["done"] == 4
    assert rows(app, steps) == set()


def test_a_workflow_retry_with_a_missing_step_refuses_and_runs_nothing(
        api: ApiClient) -> None:
    app = api.app
    wid = failed_workflow(api)
    # A row deleted outside Leasehold (or by a version without the guard).
    app.clients.dynamodb.delete_item(TableName=app.settings.jobs_table,
                                     Key=job_key(step_job_id(wid, "b", "acme")))
    refused = api.post(f"/workflows/{wid}/retry", tenant="acme")
    assert refused.status == 409, refused.body
    assert "'b'" in refused.body["error"]["message"], refused.body
    assert run_until_idle(app) == 0
    shown = api.get(f"/workflows/{wid}", tenant="acme").body
    assert shown["state"] == "FAILED"
    assert {s["id"]: s["state"] for s in shown["steps"]} == {
        "a": "SUCCEEDED", "c": "CANCELLED", "x": "SUCCEEDED"}  # c never ran as a root
    assert "c" not in api.runs  # type: ignore[attr-defined]


def test_a_bulk_delete_keeps_the_finished_child_of_a_live_durable_parent(
        api: ApiClient, registry: TaskRegistry, clock: FakeClock) -> None:
    app = api.app

    @registry.task("parent")
    def parent(payload: Any, ctx: JobContext) -> Any:
        fast = ctx.spawn("ok", 1)
        slow = ctx.spawn("ok", 2, delay_seconds=3600)  # finishes an hour later
        return [r["result"] for r in ctx.wait_for([fast, slow])]

    job = submit(app, JobSpec(task="parent", tenant="acme")).job
    for _ in range(5):
        deliver(app)
    assert app.store.get(job.job_id).state is JobState.SLEEPING
    done, _ = list_jobs(app, "acme", limit=50, where=JobFilter(states={JobState.SUCCEEDED}))
    assert len(done) == 1  # the fast child
    preview = api.post("/jobs/bulk", {"action": "delete", "dry_run": True}, tenant="acme").body
    assert preview["matches"] == 0, preview
    bulk_id = api.post("/jobs/bulk", {"action": "delete"}, tenant="acme").body["bulk_id"]
    run_bulk(app, clock, bulk_id)
    assert app.store.get(done[0].job_id).state is JobState.SUCCEEDED  # kept
    assert preview["referenced_by"] == {"durable parent": 1}
    assert app.store.get(bulk_id).result["referenced_by"] == {"durable parent": 1}


def test_a_lost_delete_response_counts_the_row_as_deleted_not_skipped(
        api: ApiClient, clock: FakeClock) -> None:
    app = api.app
    plain = [plain_job(api) for _ in range(3)]
    bulk_id = api.post("/jobs/bulk", {"action": "delete"}, tenant="acme").body["bulk_id"]
    # The second delete lands and its response is lost: botocore's retry finds no row.
    injector = FaultInjector([Fault(target="dynamodb.DeleteItem", kind="lose", times=1,
                                    when=lambda params: plain[1] in json.dumps(params))])
    injector.install(app.clients.dynamodb)
    run_bulk(app, clock, bulk_id)
    assert injector.injected[("dynamodb.DeleteItem", "lose")] == 1
    assert rows(app, plain) == set()
    result = app.store.get(bulk_id).result
    assert (result["done"], result["skipped"]) == (3, 0), result
