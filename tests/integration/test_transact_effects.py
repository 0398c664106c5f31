"""``ctx.transact``: a handler's writes commit with the fenced finish of the attempt that
finishes the job, once, whatever is lost, refused or delivered twice (issue 24)."""

from __future__ import annotations

from typing import Any

import boto3

from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.core.context import MAX_EFFECTS, JobContext
from leasehold.core.jobs import Job
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle import handoff, sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from tests.conftest import MakeApp
from tests.integration.helpers import deliver, inject

COUNTER = "app-counters"


def _counter_app(make_app: MakeApp, registry: TaskRegistry, *, fail_first: bool = False
                 ) -> Leasehold:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ddb.create_table(TableName=COUNTER, BillingMode="PAY_PER_REQUEST",
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])

    @registry.task("count")
    def count(payload: Any, ctx: JobContext) -> None:
        ctx.transact([{"Update": {
            "TableName": COUNTER, "Key": {"pk": {"S": "n"}},
            "UpdateExpression": "ADD n :one", "ExpressionAttributeValues": {":one": {"N": "1"}}}}])
        if fail_first and ctx.attempt == 1:
            raise RuntimeError("fails after its transact: the entries must not apply")

    return make_app()


def _counter(app: Leasehold) -> int:
    item = app.clients.dynamodb.get_item(TableName=COUNTER, Key={"pk": {"S": "n"}}).get("Item")
    return int(item["n"]["N"]) if item else 0


def test_effects_commit_once_under_lost_responses_duplicates_and_re_drives(
        make_app: MakeApp, registry: TaskRegistry, clock: FakeClock) -> None:
    app = _counter_app(make_app, registry)
    jobs = [submit(app, JobSpec(task="count")).job.job_id for _ in range(6)]
    # Every finish transaction lands and its caller sees an error (once each), and throttles.
    injector = inject(
        app, Fault(target="dynamodb.TransactWriteItems", kind="lose-raise", times=None),
           Fault(target="dynamodb.TransactWriteItems", kind="throttle", rate=0.3, times=None))
    deliver(app)
    clock.advance(app.settings.lease_seconds + 120)
    sweeper.sweep(app)  # re-drives whatever still looks unfinished
    deliver(app)
    for job in jobs:  # duplicate deliveries of the finished jobs' messages
        handoff.send(app.queues, app.store.get(job), app.now())
    deliver(app)
    assert all(app.store.get(job).state is JobState.SUCCEEDED for job in jobs)
    assert _counter(app) == len(jobs)
    assert injector.injected[("dynamodb.TransactWriteItems", "lose-raise")] >= len(jobs)


def test_a_failed_attempts_effects_never_apply(
        make_app: MakeApp, registry: TaskRegistry, clock: FakeClock) -> None:
    app = _counter_app(make_app, registry, fail_first=True)
    job = submit(app, JobSpec(task="count")).job.job_id
    for _ in range(4):
        deliver(app)
        clock.advance(600)
        sweeper.sweep(app)
    assert app.store.get(job).state is JobState.SUCCEEDED
    assert _counter(app) == 1


def test_over_limit_or_malformed_entries_fail_the_attempt_before_anything_is_written(
        make_app: MakeApp, registry: TaskRegistry) -> None:
    @registry.task("too_many")
    def too_many(payload: Any, ctx: JobContext) -> None:
        ctx.transact([{"ConditionCheck": {"TableName": "x", "Key": {},
                                          "ConditionExpression": "attribute_exists(a)"}}]
                     * (MAX_EFFECTS + 1))

    @registry.task("malformed")
    def malformed(payload: Any, ctx: JobContext) -> None:
        ctx.transact([{"Upsert": {"TableName": "x"}}])

    app = make_app()
    jobs = [submit(app, JobSpec(task=task)).job for task in ("too_many", "malformed")]
    deliver(app)
    for job in jobs:
        done = app.store.get(job.job_id)
        assert done.state is JobState.DEAD and done.attempt == 1
        assert done.error is not None and "ctx.transact" in done.error.message


def _run_through_retries(app: Leasehold, clock: FakeClock, task: str) -> Job:
    """Submit one job of ``task`` and deliver, retry and sweep until it has had its tries."""
    job = submit(app, JobSpec(task=task)).job.job_id
    for _ in range(4):
        deliver(app)
        clock.advance(600)
        sweeper.sweep(app)
    return app.store.get(job)


def test_once_runs_an_external_effect_once_across_attempts(
        make_app: MakeApp, registry: TaskRegistry, clock: FakeClock) -> None:
    charges: list[int] = []

    @registry.task("charge")
    def charge(payload: Any, ctx: JobContext) -> Any:
        receipt = ctx.once("charge", lambda: charges.append(ctx.fencing_token) or len(charges))
        if ctx.attempt == 1:
            raise RuntimeError("fails after the external call")
        return receipt

    done = _run_through_retries(make_app(), clock, "charge")
    assert done.state is JobState.SUCCEEDED and done.attempt == 2
    assert len(charges) == 1 and done.result == 1


def test_once_inside_a_durable_step_keeps_the_effect_single_when_the_step_runs_again(
        make_app: MakeApp, registry: TaskRegistry, clock: FakeClock) -> None:
    """ctx.step stores a step's result only when the step returns: a step that fails after
    its external call runs again on the next attempt. ctx.once inside it makes that call once
    to completion, and the stored step then carries its recorded result."""
    charges: list[int] = []
    bodies: list[int] = []

    @registry.task("checkout")
    def checkout(payload: Any, ctx: JobContext) -> Any:
        def charge_then_reserve() -> dict[str, int]:
            bodies.append(ctx.attempt)
            receipt = ctx.once("charge",
                               lambda: charges.append(ctx.fencing_token) or len(charges))
            if ctx.attempt == 1:
                raise RuntimeError("the step fails after its external call")
            return {"receipt": receipt}

        step = ctx.step("checkout", charge_then_reserve)
        ctx.step("after", lambda: None)
        return step

    done = _run_through_retries(make_app(), clock, "checkout")
    assert done.state is JobState.SUCCEEDED and done.attempt == 2
    assert bodies == [1, 2]  # the step ran again: it had not returned
    assert charges == [charges[0]] and done.result == {"receipt": 1}  # the charge did not
