"""Cells of the combination table (docs/design.md, "Combinations: every option on every
lifecycle path") for durable execution and effects: steps, sleeps and children, and
``ctx.transact``, met by the paths no feature's own tests walked. Each test names its cells.
Through the API, the real store, queues and worker (moto), a fixed clock, and faults injected
at the botocore layer where a guarantee is at stake."""


from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.time import ticker
from leasehold.workflows.progress import step_job_id
from tests.integration.api_client import ApiClient
from tests.integration.combinations import (
    FAST,
    TENANT,
    api,
    app,
    failing,
    no_delays,
    post,
    rerun,
    states,
)
from tests.integration.helpers import deliver, inject

#: The module's fixtures (pytest finds them by name).
FIXTURES = (api, app, failing)


def test_a_durable_attempt_past_its_timeout_keeps_its_steps_and_stores_nothing_late(
        app: Leasehold, registry: TaskRegistry) -> None:
    """Cell (durable step) x (timeout): the attempt that timed out keeps the steps it stored
    before (its retry replays them without running them again), and the step it tries after
    the worker gave up on it is not stored (the store is fenced by the attempt's lease): the
    retry runs that step and stores its own result."""
    from leasehold.core.spec import JobSpec
    from leasehold.durable import records
    from leasehold.lifecycle.submission import submit

    ran: list[str] = []
    late_done = threading.Event()

    def noted(tag: str, value: int) -> int:
        ran.append(tag)
        return value

    @registry.task("slow_steps", retry=FAST, timeout_seconds=1)
    def slow_steps(payload: Any, ctx: JobContext) -> Any:
        first = ctx.step("first", noted, f"first@{ctx.attempt}", ctx.attempt)
        if ctx.attempt > 1:
            return [first, ctx.step("second", noted, "second@2", 2)]
        ctx.wait_cancelled(10)  # the worker gives up on the attempt at its timeout
        try:
            for _ in range(100):  # and writes its end (the retry): then the late step
                if app.store.get(ctx.job_id).state is not JobState.RUNNING:
                    break
                time.sleep(0.05)
            return ctx.step("second", noted, "second@1", 1)
        finally:
            late_done.set()

    job = submit(app, JobSpec(task="slow_steps")).job
    deliver(app, once=True)
    timed_out = app.store.get(job.job_id)
    assert (timed_out.state, timed_out.error and timed_out.error.type) == (
        JobState.QUEUED, "AttemptTimeout")
    assert late_done.wait(10)
    assert ran == ["first@1", "second@1"]  # the late step ran, and its store was refused:
    assert records.get(app, job.job_id, "step#second") is None
    deliver(app)
    done = app.store.get(job.job_id)
    assert (done.state, done.result) == (JobState.SUCCEEDED, [1, 2])
    assert ran == ["first@1", "second@1", "second@2"]  # first replayed, not run again


def test_the_effects_of_an_attempt_cancelled_or_timed_out_never_apply(
        app: Leasehold, registry: TaskRegistry) -> None:
    """Cells (ctx.transact) x (cancel, timeout, manual retry): the entries commit only with
    the attempt's success. A cancel that lands while the attempt runs ends it CANCELLED (no
    success over a cancel), and its entries never apply; an attempt past its timeout writes no
    finish, so neither do its entries; the retry that follows (automatic, or by hand) applies
    its own once."""
    import boto3

    from leasehold.core.spec import JobSpec
    from leasehold.lifecycle import control
    from leasehold.lifecycle.submission import submit

    boto3.client("dynamodb", region_name="us-east-1").create_table(
        TableName="counters", BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
    cancelled: set[str] = set()

    @registry.task("counted", retry=FAST, timeout_seconds=1)
    def counted(payload: Any, ctx: JobContext) -> Any:
        ctx.transact([{"Update": {
            "TableName": "counters", "Key": {"pk": {"S": payload}},
            "UpdateExpression": "ADD n :one", "ExpressionAttributeValues": {":one": {"N": "1"}}}}])
        if payload == "cancel" and ctx.job_id not in cancelled:
            cancelled.add(ctx.job_id)
            control.cancel(app, ctx.job_id)  # a user's cancel lands while it runs
        if payload == "timeout" and ctx.attempt == 1:
            ctx.wait_cancelled(10)  # the worker gives up on it at its timeout
        return payload

    def count(key: str) -> int:
        item = app.clients.dynamodb.get_item(TableName="counters",
                                             Key={"pk": {"S": key}}).get("Item")
        return int(item["n"]["N"]) if item else 0

    stopped = submit(app, JobSpec(task="counted", payload="cancel")).job.job_id
    slow = submit(app, JobSpec(task="counted", payload="timeout")).job.job_id
    deliver(app, once=True)
    assert app.store.get(stopped).state is JobState.CANCELLED
    timed_out = app.store.get(slow)
    assert (timed_out.state, timed_out.error and timed_out.error.type) == (
        JobState.QUEUED, "AttemptTimeout")
    assert (count("cancel"), count("timeout")) == (0, 0)
    control.retry(app, stopped)
    deliver(app)
    assert states(app, [stopped, slow]) == [JobState.SUCCEEDED] * 2
    assert (count("cancel"), count("timeout")) == (1, 1)


def test_a_parent_retried_after_a_failure_replays_its_children_without_spawning_again(
        app: Leasehold, registry: TaskRegistry) -> None:
    """Cell (durable spawn) x (retry, timeout): an attempt that fails (or times out: the same
    retry) after spawning does not end the parent, so its children are not cancelled; the
    retry's replay answers each call site with the child it made, and waits for them."""
    from leasehold.core.spec import JobSpec
    from leasehold.lifecycle.submission import submit

    @registry.task("kid")
    def kid(payload: Any, ctx: JobContext) -> Any:
        return payload * 10

    @registry.task("spawns_then_fails", retry=FAST)
    def spawns_then_fails(payload: Any, ctx: JobContext) -> Any:
        ids = [ctx.spawn("kid", i) for i in range(3)]
        if ctx.attempt == 1:
            raise ValueError("the first attempt fails after spawning")
        return [r["result"] for r in ctx.wait_for(ids)]

    parent = submit(app, JobSpec(task="spawns_then_fails")).job.job_id
    for _ in range(8):
        if not deliver(app):
            break
    done = app.store.get(parent)
    assert (done.state, done.attempt, done.result) == (JobState.SUCCEEDED, 2, [0, 10, 20])
    rows = app.clients.dynamodb.scan(TableName=app.settings.jobs_table)["Count"]
    assert rows == 4  # the parent and its three children: no second spawn


@pytest.mark.parametrize("path", ["manual retry", "redrive", "bulk retry"])
def test_a_parent_re_run_by_hand_gets_its_cancelled_children_run_again(
        app: Leasehold, api: ApiClient, registry: TaskRegistry, clock: FakeClock,
        failing: dict[str, bool], monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """Cells (durable spawn) x (manual retry, redrive, bulk action): a parent that ended DEAD
    cancelled its live child (on_parent_end="cancel"). Re-run by hand, its replay spawns that
    call site again (a new child, since the run is new) and waits for it, while a child that
    had succeeded stands (not run again). Before, the replay answered with the CANCELLED child
    and the parent succeeded without its work. The re-spawn's response is lost: its retry
    finds its own write."""
    no_delays(app, monkeypatch)
    kids: list[int] = []

    @registry.task("kid")
    def kid(payload: Any, ctx: JobContext) -> Any:
        kids.append(payload)
        return payload * 10

    @registry.task("parent_once", max_attempts=1)
    def parent_once(payload: Any, ctx: JobContext) -> Any:
        first = ctx.spawn("kid", 1)
        [done] = ctx.wait_for([first])
        second = ctx.spawn("kid", 2, delay_seconds=600)
        if failing.get("parent"):
            raise ValueError("the first run fails after its second spawn")
        return [done["result"], *(r["result"] for r in ctx.wait_for([second]))]

    failing["parent"] = True
    parent = post(api, "parent_once", None, labels={"rerun": "yes"})
    for _ in range(4):
        deliver(app)
    assert app.store.get(parent).state is JobState.DEAD
    shown = api.get(f"/jobs/{parent}", tenant=TENANT).body["children"]
    assert [c["state"] for c in shown] == ["SUCCEEDED", "CANCELLED"]
    failing.clear()
    injector = inject(app, Fault(target="dynamodb.TransactWriteItems", kind="lose",
                                 when=lambda params: "child#kid.2" in json.dumps(params)))
    rerun(app, api, clock, path, [parent])
    clock.advance(600)
    for _ in range(8):
        deliver(app)
        ticker.promote_due(app)
        sweeper.sweep(app)
    done = app.store.get(parent)
    assert (done.state, done.result) == (JobState.SUCCEEDED, [10, 20])
    assert kids == [1, 2]  # the succeeded child stood; the cancelled one's work ran once
    assert injector.injected[("dynamodb.TransactWriteItems", "lose")] == 1
    again = api.get(f"/jobs/{parent}", tenant=TENANT).body["children"]
    assert [c["state"] for c in again] == ["SUCCEEDED", "SUCCEEDED"]
    assert again[1]["job_id"] != shown[1]["job_id"]
    # The child that stood is marked as this run's: later replays read no child row for it.
    from leasehold.durable import records
    assert (records.get(app, parent, "child#kid.1") or {}).get("job_run") == 1


@pytest.mark.parametrize("path", ["redrive", "bulk retry", "workflow retry"])
def test_a_re_run_keeps_its_sleeps_end_and_applies_its_effects_once(
        app: Leasehold, api: ApiClient, registry: TaskRegistry, clock: FakeClock,
        failing: dict[str, bool], path: str) -> None:
    """Cells (durable sleep, ctx.transact) x (redrive, bulk action, workflow retry): a job
    that slept, then failed (DEAD), re-run by each path: the sleep keeps its end (the re-run
    does not sleep again), and the entries of ctx.transact commit once, with the re-run's
    success only (the failed run's never applied)."""
    import boto3

    boto3.client("dynamodb", region_name="us-east-1").create_table(
        TableName="tally", BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
    slept: list[str] = []

    @registry.task("nap_then_count", max_attempts=1)
    def nap_then_count(payload: Any, ctx: JobContext) -> Any:
        slept.append("run")
        ctx.sleep(3600)  # a long sleep: the ticker wakes it
        ctx.transact([{"Update": {
            "TableName": "tally", "Key": {"pk": {"S": "n"}},
            "UpdateExpression": "ADD n :one", "ExpressionAttributeValues": {":one": {"N": "1"}}}}])
        if failing.get("nap"):
            raise ValueError("fails after its sleep and its transact")
        return "done"

    def tally() -> int:
        item = app.clients.dynamodb.get_item(TableName="tally",
                                             Key={"pk": {"S": "n"}}).get("Item")
        return int(item["n"]["N"]) if item else 0

    failing["nap"] = True
    if path == "workflow retry":
        wid = api.post("/workflows", {"name": "w", "steps": [
            {"id": "a", "task": "nap_then_count"}]}, tenant=TENANT).body["workflow_id"]
        job = step_job_id(wid, "a", TENANT)
    else:
        job = post(api, "nap_then_count", None, labels={"rerun": "yes"})
    deliver(app)
    assert app.store.get(job).state is JobState.SLEEPING
    clock.advance(3600)
    ticker.promote_due(app)
    deliver(app)
    assert app.store.get(job).state is JobState.DEAD
    assert (slept, tally()) == (["run", "run"], 0)  # slept once, woke; the failure applied none
    failing.clear()
    if path == "workflow retry":
        assert api.post(f"/workflows/{wid}/retry", tenant=TENANT).status == 200
    else:
        rerun(app, api, clock, path, [job])
    for _ in range(3):
        deliver(app)
    done = app.store.get(job)
    assert (done.state, done.result) == (JobState.SUCCEEDED, "done")
    assert slept == ["run", "run", "run"]  # the re-run replayed the sleep: it did not sleep
    assert tally() == 1
