"""Durable children where they meet the rest (issue 29, defects 4-6): a spawn goes through
the submission intakes, takes a live-job slot under its tenant's cap (and waits when there is
none), is bounded per job, and is cancelled when its parent ends, also when the process that
ended the parent died before it cancelled them. Through moto, the real worker and sweeper,
with faults injected at the botocore layer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.aws.queues import Message
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.flowcontrol import START_BY
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.durable import children
from leasehold.lifecycle import control, sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Delivery, Worker
from leasehold.time.ticker import promote_due
from tests.conftest import MakeApp

from .api_client import api_for
from .helpers import deliver, inject, live_counted_jobs, tenant_live, whole_error
from .test_client_operations import client_for

FAST = RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0)


def spawning(params: Any) -> bool:
    """A transaction that spawns a child (it puts a ``child#`` record)."""
    return "child#" in json.dumps(params)


@pytest.fixture
def ran() -> list[str]:
    return []


@pytest.fixture
def tasks(registry: TaskRegistry, ran: list[str]) -> TaskRegistry:
    @registry.task("one_at_a_time", retry=FAST, unique={"key": "the-one"})
    def one_at_a_time(payload: Any, ctx: JobContext) -> Any:
        ran.append(f"one:{payload}")
        return payload

    @registry.task("windowed", retry=FAST, start_within_seconds=60)
    def windowed(payload: Any, ctx: JobContext) -> Any:
        ran.append("windowed")

    @registry.task("kid", retry=FAST)
    def kid(payload: Any, ctx: JobContext) -> Any:
        ran.append(f"kid:{payload}")
        return payload * 10

    @registry.task("spawn_then_sleep", retry=FAST)
    def spawn_then_sleep(payload: Any, ctx: JobContext) -> Any:
        ids = [ctx.spawn(payload["task"], i, **payload.get("options", {}))
               for i in range(payload["n"])]
        ctx.step("ids", lambda: ids)
        ctx.sleep(3600)

    @registry.task("fan_out", retry=FAST)
    def fan_out(payload: Any, ctx: JobContext) -> Any:
        ids = [ctx.spawn("kid", i) for i in range(payload["n"])]
        if payload.get("free"):
            ids.append(ctx.spawn("kid", 99, name="free", on_parent_end="abandon"))
        if payload.get("fail"):
            raise ValueError("the parent fails after spawning")
        return [r["result"] for r in ctx.wait_for(ids)]

    @registry.task("fire_and_forget", retry=FAST)
    def fire_and_forget(payload: Any, ctx: JobContext) -> Any:
        kept = ctx.spawn("kid", 1)
        ctx.spawn("kid", 2, name="left", on_parent_end="abandon")
        return kept

    return registry


def jobs_of(app: Leasehold, task: str) -> list[Any]:
    ids = [item["job_id"]["S"] for item in app.clients.dynamodb.scan(
        TableName=app.settings.jobs_table, ProjectionExpression="job_id")["Items"]]
    return [job for job in app.store.batch_get(ids) if job.task == task]


# -- defect 4: the intakes ----------------------------------------------------------------

def test_a_spawn_goes_through_the_intakes_and_a_unique_child_is_answered_by_its_live_holder(
    app: Leasehold, tasks: TaskRegistry
) -> None:
    # The spawn's transaction lands and its response is lost: the retry recognises its row.
    injector = inject(app, Fault(target="dynamodb.TransactWriteItems", kind="lose",
                                 when=spawning))
    parent = submit(app, JobSpec(task="spawn_then_sleep",
                                 payload={"task": "one_at_a_time", "n": 3})).job
    deliver(app, once=True)
    assert app.store.get(parent.job_id).state is JobState.SLEEPING
    live = [job for job in jobs_of(app, "one_at_a_time") if job.state.live]
    assert len(live) == 1  # the task's unique default held: one live job for the key
    assert injector.injected[("dynamodb.TransactWriteItems", "lose")] == 1
    holder = live[0].job_id
    # A submission of that task through the API is answered by the child, as a duplicate.
    reply = api_for(app).post("/jobs", {"task": "one_at_a_time", "payload": 7},
                              tenant="default")
    assert (reply.status, reply.body["job_id"], reply.body["duplicate"]) == (200, holder, True)
    # The three call sites were answered by the holder, and a replay answers them again.
    shown = api_for(app).get(f"/jobs/{parent.job_id}", tenant="default").body
    assert [(c["name"], c["job_id"], c["own"]) for c in shown["children"]] == [
        ("one_at_a_time.1", holder, True), ("one_at_a_time.2", holder, False),
        ("one_at_a_time.3", holder, False)]
    assert len(jobs_of(app, "one_at_a_time")) == 1


def test_a_spawned_child_gets_its_tasks_start_window(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], clock: FakeClock
) -> None:
    submit(app, JobSpec(task="spawn_then_sleep", payload={"task": "windowed", "n": 1}))
    deliver(app, once=True)
    [child] = jobs_of(app, "windowed")
    assert child.extra[START_BY] == child.created_at + 60_000
    clock.advance(61)
    deliver(app)  # its lease is refused past the window: it ends EXPIRED without running
    assert app.store.get(child.job_id).state is JobState.EXPIRED
    assert "windowed" not in ran


# -- defect 5: the parent's end reaches its children --------------------------------------

@pytest.mark.parametrize("end", ["cancel", "failure", "deadline"])
def test_a_parent_that_ends_cancels_its_live_children_and_abandon_keeps_one(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], clock: FakeClock, end: str
) -> None:
    payload = {"n": 3, "free": True, "fail": end == "failure"}
    parent = submit(app, JobSpec(task="fan_out", payload=payload, max_attempts=1,
                                 deadline_seconds=600 if end == "deadline" else None)).job
    deliver(app, once=True)  # the parent spawns, then waits (or fails in that attempt)
    kids = {job.payload: job for job in jobs_of(app, "kid")}
    assert sorted(kids) == [0, 1, 2, 99]
    assert {job.extra["parent_id"] for job in kids.values()} == {parent.job_id}
    if end == "deadline":
        clock.advance(600)
    busy = kids[0]
    if end != "failure":  # (a failing parent ended in the attempt that spawned)
        # One child is RUNNING (leased by a worker elsewhere) when the parent ends.
        now = app.now()
        app.store.lease(busy.job_id, busy.epoch, owner="elsewhere", expires_at=now + 60_000,
                        now=now, actor="elsewhere")
    if end == "cancel":
        assert control.cancel(app, parent.job_id).state is JobState.CANCELLED
    elif end == "deadline":
        # Its wake-up message leases it past its deadline: it ends DEAD.
        asleep = app.store.get(parent.job_id)
        Worker(app).process(Delivery(body=Message(parent.job_id, asleep.epoch).body()))
    ended = app.store.get(parent.job_id)
    assert ended.state is (JobState.CANCELLED if end == "cancel" else JobState.DEAD)
    if end != "failure":
        assert app.store.get(busy.job_id).cancel_requested  # RUNNING: a cancel request
    for payload in (1, 2):
        assert app.store.get(kids[payload].job_id).state is JobState.CANCELLED
    deliver(app)
    assert sorted(ran) == ["kid:99"]  # only the abandoned child ran
    assert app.store.get(kids[99].job_id).state is JobState.SUCCEEDED
    # The parent's page shows its children and their states; a child's shows its parent.
    api = api_for(app)
    shown = api.get(f"/jobs/{parent.job_id}", tenant="default").body
    assert sorted((c["name"], c["state"], c["on_parent_end"]) for c in shown["children"]) == [
        ("free", "SUCCEEDED", "abandon"),
        ("kid.1", "CANCELLED" if end == "failure" else "RUNNING", "cancel"),
        ("kid.2", "CANCELLED", "cancel"), ("kid.3", "CANCELLED", "cancel")]
    assert shown["more_children"] is False
    assert client_for(app, "default").get(parent.job_id)["children"] == shown["children"]
    child = api.get(f"/jobs/{busy.job_id}", tenant="default").body
    assert (child["parent_id"], child["on_parent_end"]) == (parent.job_id, "cancel")
    assert api.get(f"/jobs/{parent.job_id}", tenant="intruder").status == 404


def test_a_parent_that_succeeds_in_the_attempt_that_spawned_cancels_its_unawaited_children(
    app: Leasehold, tasks: TaskRegistry, ran: list[str]
) -> None:
    # Its worker's view of the row (from the lease) does not show it has children yet.
    parent = submit(app, JobSpec(task="fire_and_forget")).job
    deliver(app, once=True)
    assert app.store.get(parent.job_id).state is JobState.SUCCEEDED
    kids = {job.payload: job.state for job in jobs_of(app, "kid")}
    assert kids == {1: JobState.CANCELLED, 2: JobState.QUEUED}
    deliver(app)
    assert ran == ["kid:2"]


def test_children_of_a_parent_whose_process_died_after_its_end_are_cancelled_by_the_sweeper(
    app: Leasehold, tasks: TaskRegistry, ran: list[str]
) -> None:
    parent = submit(app, JobSpec(task="fan_out", payload={"n": 2})).job
    deliver(app, once=True)
    # The process dies between the parent's terminal write and its children's cancels.
    injector = inject(app, Fault(target="dynamodb.Query", kind="crash", when=spawning))
    with pytest.raises(InjectedCrash):
        control.cancel(app, parent.job_id)
    injector.revive()  # the next process
    assert app.store.get(parent.job_id).state is JobState.CANCELLED
    kids = jobs_of(app, "kid")
    assert [job.state for job in kids] == [JobState.QUEUED] * 2  # the cancels never ran
    report = sweeper.sweep(app)
    assert report.repaired["children"] == 1
    assert all(app.store.get(job.job_id).state is JobState.CANCELLED for job in kids)
    assert sweeper.sweep(app).repaired["children"] == 0  # the open item is closed
    deliver(app)
    assert ran == []  # no child of the cancelled parent ran


# -- defect 6: the tenant's cap ------------------------------------------------------------

def test_children_take_slots_under_the_tenant_cap_and_a_spawn_over_it_waits(
    make_app: MakeApp, tasks: TaskRegistry, clock: FakeClock
) -> None:
    app = make_app(tenant_max_live=3)  # the API's admission and the workers' spawn alike
    api = api_for(app)
    # Throttled spawn transactions are retried; none takes a slot twice.
    injector = inject(app, Fault(target="dynamodb.TransactWriteItems", kind="throttle",
                                 times=3, when=spawning))
    injector.throttle_delay = 0
    parent = api.post("/jobs", {"task": "fan_out", "payload": {"n": 4}},
                      tenant="default").body["job_id"]
    deliver(app, once=True)
    # The parent holds one slot, two children hold the others; the third spawn waits.
    asleep = app.store.get(parent)
    assert (asleep.state, asleep.extra["waiting"]) == (JobState.SLEEPING, "admission")
    assert tenant_live(app) == live_counted_jobs(app) == 3
    assert api.get("/stats", tenant="default").body["live"] == 3
    assert injector.injected[("dynamodb.TransactWriteItems", "throttle")] == 3
    assert api.post("/jobs", {"task": "kid", "payload": 0}, tenant="default").status == 429
    for _ in range(12):  # children finish and free slots; the parent tries again
        deliver(app)
        clock.advance(children.ADMISSION_POLL_SECONDS)
        promote_due(app)
        assert tenant_live(app) == live_counted_jobs(app) <= 3
        if app.store.get(parent).state is JobState.SUCCEEDED:
            break
    done = app.store.get(parent)
    assert done.state is JobState.SUCCEEDED and done.result == [0, 10, 20, 30]
    assert tenant_live(app) == live_counted_jobs(app) == 0
    assert api.get("/stats", tenant="default").body["live"] == 0


def test_a_spawn_the_cap_can_never_admit_fails_at_once(
    make_app: MakeApp, tasks: TaskRegistry
) -> None:
    app = make_app(tenant_max_live=1)
    api = api_for(app)
    parent = api.post("/jobs", {"task": "fan_out", "payload": {"n": 1}},
                      tenant="default").body["job_id"]
    deliver(app)
    dead = app.store.get(parent)
    assert dead.state is JobState.DEAD and dead.error is not None
    assert dead.error.type == "CapTooSmall"
    assert "could never be admitted" in whole_error(app, dead).message
    assert dead.attempt == 1  # not retried: every attempt would meet the same cap
    assert jobs_of(app, "kid") == [] and tenant_live(app) == 0


def test_a_job_spawns_at_most_its_bound_of_children(
    app: Leasehold, tasks: TaskRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert children.MAX_CHILDREN == 1_000  # the stated bound; a smaller one keeps this fast
    monkeypatch.setattr(children, "MAX_CHILDREN", 3)
    parent = submit(app, JobSpec(task="fan_out", payload={"n": 3, "free": True})).job
    deliver(app, once=True)  # the fourth spawn is refused
    dead = app.store.get(parent.job_id)
    assert dead.state is JobState.DEAD and dead.error is not None
    assert dead.error.type == "TooManyChildren" and dead.attempt == 1
    assert len(jobs_of(app, "kid")) == 3
    # Its children end with it.
    assert all(job.state is JobState.CANCELLED for job in jobs_of(app, "kid"))


def test_a_cap_in_the_runtimes_settings_holds_a_workers_spawn_as_it_holds_the_api(
    app: Leasehold, tasks: TaskRegistry, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 44: the cap was an environment variable each function read for itself, so a
    runtime whose API was capped at 1 and whose workers were not let one admitted parent run
    25 live children. The runtime's settings carry the cap (the construct and ``leasehold
    dev`` set them alike on every function); the worker process's own environment, which
    has no cap, no longer decides."""
    from leasehold.api.context import ApiConfig
    from leasehold.compose import compose
    from leasehold.settings import Settings

    from .api_client import ApiClient

    monkeypatch.delenv("LEASEHOLD_TENANT_MAX_LIVE", raising=False)  # the worker's own env
    runtime_env = {**app.settings.to_env(), "LEASEHOLD_TENANT_MAX_LIVE": "1"}
    capped = compose(Settings.from_env(runtime_env), clock=clock, registry=tasks,
                     clients=app.clients)
    api = ApiClient(capped, ApiConfig.from_env({**runtime_env,
                                                "LEASEHOLD_TRUST_TENANT_HEADER": "1"}))
    reply = api.post("/jobs", {"task": "fan_out", "payload": {"n": 25}}, tenant="default")
    assert reply.status == 201, reply
    assert api.post("/jobs", {"task": "kid", "payload": 0}, tenant="default").status == 429
    deliver(capped)
    parent = capped.store.get(reply.body["job_id"])
    assert jobs_of(capped, "kid") == []  # not one child, let alone 25 live ones
    assert parent.state is JobState.DEAD and parent.error is not None
    assert parent.error.type == "CapTooSmall"
    assert tenant_live(capped) == live_counted_jobs(capped) == 0


def test_a_tenants_plan_caps_its_admission_and_its_workers_spawns_alike(
    app: Leasehold, tasks: TaskRegistry, clock: FakeClock
) -> None:
    """The deployment lets every tenant have 10,000 live jobs; tenant ``small``'s plan, a
    row of the tenants table, caps it at 3. The API admits under the plan's cap, a worker's
    ``ctx.spawn`` waits under it, ``/stats`` shows it, and another tenant keeps the
    deployment's."""
    from leasehold.tenancy.plans import set_plan

    set_plan(app, "small", max_live=3, rate=100, burst=100)
    api = api_for(app)
    parent = api.post("/jobs", {"task": "fan_out", "payload": {"n": 4}},
                      tenant="small").body["job_id"]
    deliver(app, once=True)
    asleep = app.store.get(parent)
    assert (asleep.state, asleep.extra["waiting"]) == (JobState.SLEEPING, "admission")
    assert tenant_live(app, "small") == live_counted_jobs(app, "small") == 3
    assert api.post("/jobs", {"task": "kid", "payload": 0}, tenant="small").status == 429
    stats = api.get("/stats", tenant="small").body
    assert stats["live"] == 3
    assert stats["limits"]["max_live"] == 3 and stats["limits"]["rate"] == 100
    assert stats["limits"]["plan"] is True
    other = api.get("/stats", tenant="default").body["limits"]
    assert (other["max_live"], other["plan"]) == (10_000, False)
    assert api.post("/jobs", {"task": "kid", "payload": 0}, tenant="default").status == 201
    for _ in range(12):
        deliver(app)
        clock.advance(children.ADMISSION_POLL_SECONDS)
        promote_due(app)
        assert tenant_live(app, "small") <= 3
        if app.store.get(parent).state is JobState.SUCCEEDED:
            break
    assert app.store.get(parent).result == [0, 10, 20, 30]
