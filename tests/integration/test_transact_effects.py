"""``ctx.transact``: a handler's writes commit with the fenced finish of the attempt that
finishes the job, once, whatever is lost, refused or delivered twice (issue 24)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.clock import FakeClock
from leasehold.core.context import MAX_EFFECTS, JobContext
from leasehold.core.jobs import Job
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle import handoff, sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.time.ticker import promote_due
from tests.conftest import MakeApp
from tests.integration.helpers import deliver, inject, submit_swept, whole_error

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
        assert done.error is not None and "ctx.transact" in whole_error(app, done).message


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


# -- entries inside a durable step, and entries DynamoDB refuses (issue 29) -----------------

FAST = RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0)


def _add_one(key: str) -> dict[str, Any]:
    return {"Update": {"TableName": COUNTER, "Key": {"pk": {"S": key}},
                       "UpdateExpression": "ADD n :one",
                       "ExpressionAttributeValues": {":one": {"N": "1"}}}}


def _counts(app: Leasehold) -> dict[str, int]:
    items = app.clients.dynamodb.scan(TableName=COUNTER, ConsistentRead=True)["Items"]
    return {item["pk"]["S"]: int(item["n"]["N"]) for item in items if "n" in item}


def _run_until_finished(app: Leasehold, clock: FakeClock, jobs: list[str],
                        rounds: int = 12) -> None:
    for _ in range(rounds):
        if all(app.store.get(job).state.terminal for job in jobs):
            return
        deliver(app)
        clock.advance(app.settings.lease_seconds + app.settings.skew_grace_seconds + 60)
        promote_due(app)
        sweeper.sweep(app)


def test_effects_inside_a_step_apply_once_with_the_step_though_a_sleep_follows_under_lost_responses(
        make_app: MakeApp, registry: TaskRegistry, clock: FakeClock) -> None:
    """Each job adds 1 inside a step, then sleeps: the attempt that ran the step never
    finishes the job, its replay returns the stored step without calling fn. The entries
    commit with the step's record, once, whatever answers are lost or throttled."""
    app = _counter_app(make_app, registry)

    @registry.task("count_then_sleep", retry=FAST, max_attempts=10)
    def count_then_sleep(payload: Any, ctx: JobContext) -> str:
        ctx.step("count", lambda: ctx.transact([_add_one(ctx.job_id)]))
        ctx.sleep(0.5)
        return "done"

    jobs = [submit(app, JobSpec(task="count_then_sleep")).job.job_id for _ in range(5)]
    injector = inject(
        app, Fault(target="dynamodb.TransactWriteItems", kind="lose-raise", times=None),
        Fault(target="dynamodb.TransactWriteItems|dynamodb.UpdateItem", kind="lose",
              rate=0.3, times=None),
        Fault(target="dynamodb.TransactWriteItems", kind="throttle", rate=0.3, times=None))
    _run_until_finished(app, clock, jobs)
    injector.faults.clear()
    assert [app.store.get(job).state for job in jobs] == [JobState.SUCCEEDED] * len(jobs)
    assert _counts(app) == dict.fromkeys(jobs, 1)
    assert injector.injected[("dynamodb.TransactWriteItems", "lose-raise")] >= len(jobs)


@pytest.mark.parametrize("after_the_step", ["an exception", "a worker killed"])
def test_effects_inside_a_step_survive_an_attempt_that_ends_after_the_step_commits(
        make_app: MakeApp, registry: TaskRegistry, clock: FakeClock, after_the_step: str
) -> None:
    app = _counter_app(make_app, registry)

    @registry.task("count_then_fail", retry=FAST)
    def count_then_fail(payload: Any, ctx: JobContext) -> str:
        ctx.step("count", lambda: ctx.transact([_add_one(ctx.job_id)]))
        if ctx.attempt == 1 and after_the_step == "an exception":
            raise RuntimeError("fails after its step")
        return "done"

    # Row first with its sweep entry: the recovery below is the sweeper's, on the test clock.
    job = submit_swept(app, JobSpec(task="count_then_fail")).job.job_id
    stepped: list[bool] = []

    def after_step(params: Any) -> bool:
        # The process dies at its first write after the step's transaction landed.
        if stepped:
            return True
        stepped.extend(True for entry in params.get("TransactItems", [])
                       if entry.get("Put", {}).get("Item", {}).get("sk", {}).get("S")
                       == "step#count")
        return False

    if after_the_step == "a worker killed":
        injector = inject(app, Fault(target="dynamodb.*", kind="crash", when=after_step))
        with pytest.raises(InjectedCrash):
            deliver(app)
        injector.revive()
        injector.faults.clear()
        assert app.store.get(job).state is JobState.RUNNING  # the finish never happened
    _run_until_finished(app, clock, [job])
    done = app.store.get(job)
    assert done.state is JobState.SUCCEEDED and done.attempt == 2
    assert _counts(app) == {job: 1}


def _refused_check(key: str) -> dict[str, Any]:
    return {"ConditionCheck": {"TableName": COUNTER, "Key": {"pk": {"S": key}},
                               "ConditionExpression": "attribute_exists(pk)"}}


@pytest.mark.parametrize("where", ["outside a step", "inside a step"])
def test_an_effect_whose_own_condition_fails_fails_the_attempt_at_once_and_names_it(
        make_app: MakeApp, registry: TaskRegistry, clock: FakeClock, where: str) -> None:
    """Not a job stranded RUNNING until its lease runs out: the attempt fails like a
    handler's exception, the error names the entry, and the retry policy applies (the
    second attempt finds the item it checks and succeeds)."""
    app = _counter_app(make_app, registry)

    @registry.task("checked", retry=FAST, max_attempts=3)
    def checked(payload: Any, ctx: JobContext) -> str:
        entries = [_add_one(ctx.job_id), _refused_check("gate")]
        if where == "inside a step":
            ctx.step("guarded", lambda: ctx.transact(entries))
        else:
            ctx.transact(entries)
        return "done"

    job = submit(app, JobSpec(task="checked")).job.job_id
    deliver(app, once=True)
    retried = app.store.get(job)
    assert retried.state is JobState.QUEUED and retried.attempt == 1  # not RUNNING
    assert retried.error is not None and retried.error.type == "EffectRefused"
    message = whole_error(app, retried).message
    assert "entry 1 (ConditionCheck on table 'app-counters'" in message, message
    assert '"gate"' in message and "ConditionalCheckFailed" in message, message
    assert ("step 'guarded'" if where == "inside a step" else "the job's success") in message
    assert _counts(app) == {}  # nothing of the refused transaction was written
    app.clients.dynamodb.put_item(TableName=COUNTER, Item={"pk": {"S": "gate"}})
    deliver(app)
    done = app.store.get(job)
    assert done.state is JobState.SUCCEEDED and done.attempt == 2
    assert _counts(app) == {job: 1}


def test_an_effect_refused_on_every_attempt_ends_the_job_dead_not_lease_expired(
        make_app: MakeApp, registry: TaskRegistry, clock: FakeClock) -> None:
    app = _counter_app(make_app, registry)

    @registry.task("never", retry=FAST, max_attempts=2)
    def never(payload: Any, ctx: JobContext) -> None:
        ctx.transact([_refused_check("missing")])

    job = submit(app, JobSpec(task="never")).job.job_id
    deliver(app)
    dead = app.store.get(job)
    assert dead.state is JobState.DEAD and dead.attempt == 2
    assert dead.error is not None and dead.error.type == "EffectRefused"


def test_an_entry_dynamodb_rejects_outright_fails_the_attempt_instead_of_stranding_the_job(
        make_app: MakeApp, registry: TaskRegistry, clock: FakeClock) -> None:
    @registry.task("unknown_table", retry=FAST, max_attempts=1)
    def unknown_table(payload: Any, ctx: JobContext) -> None:
        ctx.transact([{"Update": {
            "TableName": "no-such-table", "Key": {"pk": {"S": "n"}},
            "UpdateExpression": "ADD n :one", "ExpressionAttributeValues": {":one": {"N": "1"}}}}])

    app = make_app()
    job = submit(app, JobSpec(task="unknown_table")).job.job_id
    deliver(app)
    dead = app.store.get(job)
    assert dead.state is JobState.DEAD and dead.attempt == 1
    assert dead.error is not None and dead.error.type == "EffectRefused"
    assert "ResourceNotFoundException" in whole_error(app, dead).message or \
        "ValidationException" in whole_error(app, dead).message, whole_error(app, dead).message
