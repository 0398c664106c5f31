"""Pausing one job and resetting a durable job from a step (issue 36), through moto, the
real worker, ticker and sweeper, with a fake clock."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.holds import PAUSED_AT, RESET_FROM
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.durable import records, reset
from leasehold.lifecycle import control, pausing, sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.time.ticker import promote_due

from .api_client import ApiClient
from .helpers import deliver, inject
from .liveness import assert_every_live_job_can_wake

FAST = RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0)


@pytest.fixture
def ran() -> list[str]:
    return []


@pytest.fixture
def tokens() -> list[str]:
    return []


@pytest.fixture
def tasks(registry: TaskRegistry, ran: list[str], tokens: list[str], clock: FakeClock
          ) -> TaskRegistry:
    def step(ctx: JobContext, name: str) -> Any:
        def work() -> str:
            ran.append(name)
            clock.advance(0.01)  # each record at its own time (its place, before seq)
            return f"{name}@{len(ran)}"
        result = ctx.step(name, work)
        clock.advance(0.01)  # what follows is recorded later too
        return result

    @registry.task("order", retry=FAST)
    def order(payload: Any, ctx: JobContext) -> Any:
        return [step(ctx, "reserve"), step(ctx, "charge"), step(ctx, "ship")]

    @registry.task("napper", retry=FAST)
    def napper(payload: Any, ctx: JobContext) -> Any:
        before = step(ctx, "before")
        ctx.sleep(payload["seconds"])
        return [before, step(ctx, "after")]

    @registry.task("approval", retry=FAST)
    def approval(payload: Any, ctx: JobContext) -> Any:
        first = step(ctx, "prepare")
        cb = ctx.callback("approve", timeout_seconds=3600)
        tokens.append(cb.token)
        return [first, cb.wait(), step(ctx, "apply")]

    @registry.task("plain", retry=FAST)
    def plain(payload: Any, ctx: JobContext) -> Any:
        ran.append(f"plain {payload}")
        return payload

    @registry.task("child", retry=FAST)
    def child(payload: Any, ctx: JobContext) -> Any:
        ran.append(f"child {payload}")
        return payload

    @registry.task("parent", retry=FAST)
    def parent(payload: Any, ctx: JobContext) -> Any:
        early = ctx.spawn("child", "early")
        step(ctx, "charge")
        late = ctx.spawn("child", "late")
        return [r["result"] for r in ctx.wait_for([early, late])]

    return registry


def state(app: Leasehold, job_id: str) -> JobState:
    return app.store.get(job_id).state


# -- pause --------------------------------------------------------------------------------

def test_a_paused_queued_job_does_not_start_until_resumed_and_says_why(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], clock: FakeClock
) -> None:
    job = submit(app, JobSpec(task="plain", payload=1)).job
    paused = pausing.pause(app, job.job_id)
    shown = paused.view()
    assert shown["paused"] is True and shown["waiting_for"].startswith("paused since")
    assert pausing.pause(app, job.job_id).extra[PAUSED_AT] == paused.extra[PAUSED_AT]
    deliver(app)  # its message meets the hold: nothing starts
    assert ran == [] and state(app, job.job_id) is JobState.QUEUED
    assert app.store.get(job.job_id).lease_owner is None
    # The sweeper finds it past its hand-off deadline: it moves on, and sends nothing.
    clock.advance(app.settings.handoff_seconds + app.settings.skew_grace_seconds + 1)
    report = sweeper.sweep(app)
    assert report.redispatched == 0 and deliver(app) == 0 and ran == []
    assert_every_live_job_can_wake(app)
    resumed = pausing.resume(app, job.job_id)
    assert resumed.view()["paused"] is False and "waiting_for" not in resumed.view()
    deliver(app)
    assert ran == ["plain 1"] and state(app, job.job_id) is JobState.SUCCEEDED


def test_a_paused_scheduled_job_is_promoted_but_not_started(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], clock: FakeClock
) -> None:
    job = submit(app, JobSpec(task="plain", payload=2, delay_seconds=3600)).job
    assert job.state is JobState.SCHEDULED
    pausing.pause(app, job.job_id)
    clock.advance(3600)
    assert promote_due(app).promoted == 1
    deliver(app)
    assert ran == [] and state(app, job.job_id) is JobState.QUEUED
    pausing.resume(app, job.job_id)
    deliver(app)
    assert ran == ["plain 2"]


def test_a_paused_sleeper_and_a_paused_callback_wait_do_not_wake_until_resumed(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], tokens: list[str], clock: FakeClock
) -> None:
    sleeper = submit(app, JobSpec(task="napper", payload={"seconds": 1})).job
    waiter = submit(app, JobSpec(task="approval")).job
    deliver(app)
    assert state(app, sleeper.job_id) is JobState.SLEEPING
    assert state(app, waiter.job_id) is JobState.SLEEPING
    pausing.pause(app, sleeper.job_id)
    pausing.pause(app, waiter.job_id)
    clock.advance(2)
    api = ApiClient(app)
    assert api.post(f"/callbacks/{tokens[0]}", {"ok": True}, tenant="default").status == 200
    deliver(app)  # the sleep's message and the callback's wake-up meet the holds
    assert ran == ["before", "prepare"]
    assert state(app, waiter.job_id) is JobState.QUEUED  # woken, and held
    clock.advance(app.settings.handoff_seconds + app.settings.skew_grace_seconds + 1)
    sweeper.sweep(app)
    deliver(app)
    assert ran == ["before", "prepare"]
    assert_every_live_job_can_wake(app)
    for job in (sleeper, waiter):
        pausing.resume(app, job.job_id)
    deliver(app)
    slept = app.store.get(sleeper.job_id)
    assert slept.state is JobState.SUCCEEDED and slept.result[0] == "before@1"
    done = app.store.get(waiter.job_id)
    assert done.state is JobState.SUCCEEDED and done.result[1] == {"ok": True}
    assert sorted(ran) == sorted(["before", "prepare", "after", "apply"])


def test_a_running_job_paused_finishes_its_attempt_and_its_retry_is_held_without_its_slot(
    app: Leasehold, registry: TaskRegistry, ran: list[str]
) -> None:
    @registry.task("flaky", retry=FAST, concurrency={"key": "acct", "limit": 1})
    def flaky(payload: Any, ctx: JobContext) -> Any:
        ran.append(f"{payload} {ctx.attempt}")
        if payload == "first" and ctx.attempt == 1:
            pausing.pause(app, ctx.job_id)  # paused while it runs
            raise ConnectionError("try again")
        return payload

    first = submit(app, JobSpec(task="flaky", payload="first")).job
    deliver(app, once=True)
    held = app.store.get(first.job_id)
    assert held.state is JobState.QUEUED and held.extra[PAUSED_AT] is not None
    second = submit(app, JobSpec(task="flaky", payload="second")).job
    deliver(app)  # the first's retry is held; the second takes the key's one slot
    assert ran == ["first 1", "second 1"]
    assert state(app, second.job_id) is JobState.SUCCEEDED
    pausing.resume(app, first.job_id)
    deliver(app)
    assert ran == ["first 1", "second 1", "first 2"]
    assert state(app, first.job_id) is JobState.SUCCEEDED


def test_a_start_window_that_passes_while_paused_ends_the_job_expired(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], clock: FakeClock
) -> None:
    job = submit(app, JobSpec(task="plain", payload=3, start_within_seconds=60)).job
    pausing.pause(app, job.job_id)
    deliver(app)
    clock.advance(61 + app.settings.skew_grace_seconds)
    sweeper.sweep(app)
    assert state(app, job.job_id) is JobState.EXPIRED and ran == []


def test_a_deadline_that_passes_while_paused_ends_the_job_dead_at_the_sweep(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], clock: FakeClock
) -> None:
    # A paused job holds no lease and no key slot, but its deadline_seconds keeps counting:
    # the sweeper ends it DEAD (DeadlineExceeded) once it passes, as for a job held by its
    # key, and never runs it (the resume finds it ended).
    job = submit(app, JobSpec(task="plain", payload=5, deadline_seconds=60)).job
    pausing.pause(app, job.job_id)
    deliver(app)
    clock.advance(61 + app.settings.skew_grace_seconds)
    sweeper.sweep(app)
    ended = app.store.get(job.job_id)
    assert (ended.state, ended.error and ended.error.type) == (JobState.DEAD, "DeadlineExceeded")
    assert ran == []


def test_pause_resume_and_reset_are_tenant_scoped_and_a_finished_job_cannot_be_paused(
    app: Leasehold, tasks: TaskRegistry, ran: list[str]
) -> None:
    api = ApiClient(app)
    job_id = api.post("/jobs", {"task": "plain", "payload": 4}, tenant="ann").body["job_id"]
    for action in ("pause", "resume"):
        assert api.post(f"/jobs/{job_id}/{action}", tenant="bob").status == 404
    assert api.post(f"/jobs/{job_id}/reset", {"from_step": "x"}, tenant="bob").status == 404
    assert not app.store.get(job_id).extra.get(PAUSED_AT)
    reply = api.post(f"/jobs/{job_id}/pause", tenant="ann")
    assert reply.status == 200 and reply.body["paused"] is True
    assert reply.body["waiting_for"].startswith("paused")
    deliver(app)
    assert ran == []
    assert api.post(f"/jobs/{job_id}/resume", tenant="ann").body["paused"] is False
    deliver(app)
    assert api.post(f"/jobs/{job_id}/pause", tenant="ann").status == 409


# -- reset --------------------------------------------------------------------------------

def test_a_reset_from_a_step_drops_it_and_later_records_and_runs_again_from_there(
    app: Leasehold, tasks: TaskRegistry, ran: list[str]
) -> None:
    api = ApiClient(app)
    job_id = api.post("/jobs", {"task": "order"}, tenant="default").body["job_id"]
    deliver(app)
    assert ran == ["reserve", "charge", "ship"]
    unknown = api.post(f"/jobs/{job_id}/reset", {"from_step": "refund"}, tenant="default")
    assert unknown.status == 422 and unknown.body["error"]["field"] == "from_step"
    reply = api.post(f"/jobs/{job_id}/reset", {"from_step": "charge"}, tenant="default")
    assert reply.status == 200 and reply.body["state"] == "QUEUED"
    assert sorted(records.load(app, job_id)) == ["step#reserve"]
    deliver(app)
    done = app.store.get(job_id)
    assert done.state is JobState.SUCCEEDED
    assert ran == ["reserve", "charge", "ship", "charge", "ship"]
    assert done.result == ["reserve@1", "charge@4", "ship@5"]  # reserve kept its result


def test_a_running_job_cannot_be_reset(
    app: Leasehold, registry: TaskRegistry
) -> None:
    api = ApiClient(app)
    replies = []

    @registry.task("self_reset", retry=FAST)
    def self_reset(payload: Any, ctx: JobContext) -> Any:
        ctx.step("one", lambda: 1)
        replies.append(api.post(f"/jobs/{ctx.job_id}/reset", {"from_step": "one"},
                                tenant="default"))
        return 1

    submit(app, JobSpec(task="self_reset"))
    deliver(app)
    assert replies[0].status == 409


def test_a_sleeping_or_waiting_job_reset_ends_its_wait_and_runs_from_the_step(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], tokens: list[str]
) -> None:
    waiter = submit(app, JobSpec(task="approval")).job
    deliver(app)
    assert state(app, waiter.job_id) is JobState.SLEEPING
    reset.reset(app, waiter.job_id, None, "prepare", rerun=_no_rerun)
    assert records.load(app, waiter.job_id) == {}
    api = ApiClient(app)
    assert api.post(f"/callbacks/{tokens[0]}", {"late": 1}, tenant="default").status == 404
    deliver(app)  # it runs from "prepare": a new callback, a new token
    assert ran == ["prepare", "prepare"] and len(set(tokens)) == 2
    assert state(app, waiter.job_id) is JobState.SLEEPING


def _no_rerun(*_: Any) -> Any:
    raise AssertionError("a live job is re-run by the reset itself")


def test_a_parent_reset_keeps_earlier_children_and_cancels_and_respawns_later_ones(
    app: Leasehold, tasks: TaskRegistry, ran: list[str]
) -> None:
    parent = submit(app, JobSpec(task="parent")).job
    deliver(app, once=True)  # spawns both, then waits
    kids = {r["name"]: r["job_id"] for r in records.load(app, parent.job_id).values()
            if r["sk"].startswith("child#")}
    assert set(kids) == {"child.1", "child.2"}
    reset.reset(app, parent.job_id, None, "charge", rerun=_no_rerun)
    assert state(app, kids["child.2"]) is JobState.CANCELLED
    assert state(app, kids["child.1"]) is JobState.QUEUED  # kept
    deliver(app)
    done = app.store.get(parent.job_id)
    assert done.state is JobState.SUCCEEDED and done.result == ["early", "late"]
    again = {r["name"]: r["job_id"] for r in records.load(app, parent.job_id).values()
             if r["sk"].startswith("child#")}
    assert again["child.1"] == kids["child.1"] and again["child.2"] != kids["child.2"]
    assert ran.count("child early") == 1 and ran.count("child late") == 1


def test_a_reset_killed_before_its_rerun_leaves_a_job_that_cannot_start_until_reset_again(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job = submit(app, JobSpec(task="order")).job
    deliver(app)
    api = ApiClient(app)
    # One write at a time: the hold, the deletions, then the re-run (killed before it).
    monkeypatch.setattr(reset, "ONE_WRITE", 0)
    requeue = control.requeue
    monkeypatch.setattr(control, "requeue", lambda *a, **k: (_ for _ in ()).throw(
        InjectedCrash("killed before the re-run")))
    with pytest.raises(InjectedCrash):
        reset.reset(app, job.job_id, None, "charge",
                    rerun=lambda j, w, r, why: control.requeue(app, j, actor="t", reason=why,
                                                               also=w, remove=r))
    monkeypatch.setattr(control, "requeue", requeue)
    held = app.store.get(job.job_id)
    assert held.state is JobState.SUCCEEDED and held.extra[RESET_FROM] == "charge"
    assert sorted(records.load(app, job.job_id)) == ["step#reserve"]
    # A plain retry of it (a workflow's, a redrive) cannot start it with half a history.
    control.requeue(app, held, actor="test", reason="manual retry")
    deliver(app)
    assert ran == ["reserve", "charge", "ship"]
    assert "reset from step 'charge'" in app.store.get(job.job_id).view()["waiting_for"]
    # Another step is refused while it is under way; the same one finishes it.
    other = api.post(f"/jobs/{job.job_id}/reset", {"from_step": "reserve"}, tenant="default")
    assert other.status == 409
    again = api.post(f"/jobs/{job.job_id}/reset", {"from_step": "charge"}, tenant="default")
    assert again.status == 200 and RESET_FROM not in app.store.get(job.job_id).extra
    deliver(app)
    assert ran == ["reserve", "charge", "ship", "charge", "ship"]
    assert state(app, job.job_id) is JobState.SUCCEEDED


def test_a_reset_in_one_write_killed_or_with_its_answer_lost_is_all_or_nothing(
    app: Leasehold, tasks: TaskRegistry, ran: list[str]
) -> None:
    job = submit(app, JobSpec(task="order")).job
    deliver(app)
    api = ApiClient(app)
    injector = inject(app, Fault(target="dynamodb.TransactWriteItems", kind="crash"))
    with pytest.raises(InjectedCrash):
        api.post(f"/jobs/{job.job_id}/reset", {"from_step": "charge"}, tenant="default")
    injector.revive()  # the process that asked for the reset died; another one reads
    assert state(app, job.job_id) is JobState.SUCCEEDED
    assert sorted(records.load(app, job.job_id)) == ["step#charge", "step#reserve",
                                                     "step#ship"]
    injector.faults[:] = [Fault(target="dynamodb.TransactWriteItems", kind="lose")]
    reply = api.post(f"/jobs/{job.job_id}/reset", {"from_step": "charge"}, tenant="default")
    assert reply.status == 200 and reply.body["state"] == "QUEUED"
    assert sorted(records.load(app, job.job_id)) == ["step#reserve"]
    deliver(app)
    assert ran == ["reserve", "charge", "ship", "charge", "ship"]


# -- the client and the CLI ---------------------------------------------------------------

def test_the_client_and_the_cli_pause_resume_and_reset_a_job(
    app: Leasehold, tasks: TaskRegistry, ran: list[str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    from leasehold.cli import job_control, main
    from leasehold.client import ApiError

    from .test_client_operations import client_for

    acme = client_for(app, "acme")
    handle = acme.submit("order")
    assert handle.pause()["paused"] is True
    deliver(app)
    assert ran == [] and acme.get(handle.job_id)["waiting_for"].startswith("paused")
    with pytest.raises(ApiError) as other:
        client_for(app, "other").resume_job(handle.job_id)
    assert other.value.status == 404
    assert acme.resume_job(handle.job_id)["paused"] is False
    deliver(app)
    assert handle.result(timeout=0) == ["reserve@1", "charge@2", "ship@3"]
    assert handle.reset("ship")["state"] == "QUEUED"
    deliver(app)
    assert ran == ["reserve", "charge", "ship", "ship"]

    # The CLI makes the same calls (its client speaks to this API in-process).
    def from_args(cls: Any, args: Any) -> Any:
        return client_for(app, "acme")
    monkeypatch.setattr(job_control.Client, "from_args", classmethod(from_args))
    assert main(["jobs", "pause", handle.job_id]) == 1  # a SUCCEEDED job: refused (409)
    capsys.readouterr()
    done = acme.submit("order")
    assert main(["jobs", "pause", done.job_id]) == 0
    assert f"paused {done.job_id}" in capsys.readouterr().out
    assert main(["jobs", "resume", done.job_id]) == 0
    deliver(app)
    assert main(["jobs", "reset", done.job_id, "--from-step", "nope"]) != 0
    assert "from_step" in capsys.readouterr().err
    assert main(["jobs", "reset", done.job_id, "--from-step", "charge"]) == 0
    assert "reset" in capsys.readouterr().out
    deliver(app)
    assert acme.get(done.job_id)["state"] == "SUCCEEDED"
