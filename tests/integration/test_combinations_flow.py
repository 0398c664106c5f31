"""Cells of the combination table (docs/design.md, "Combinations: every option on every
lifecycle path") for the flow options and the job's times: concurrency, throttle, debounce,
unique, start window and deadline, met by the paths no feature's own tests walked. Each test
names its cells. Through the API, the real store, queues and worker (moto), a fixed clock,
and faults injected at the botocore layer where a guarantee is at stake."""


from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.flowcontrol import slot_id
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.flow import key_usage, waking
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.time import ticker
from leasehold.workflows.progress import step_job_id
from tests.integration.api_client import ApiClient
from tests.integration.combinations import (
    FAST,
    TENANT,
    WRITES,
    api,
    app,
    failing,
    holders,
    lease_visible,
    no_delays,
    post,
    rerun,
    run_bulk,
    states,
)
from tests.integration.flow_helpers import flow_item
from tests.integration.helpers import deliver, inject, live_counted_jobs, tenant_live
from tests.integration.liveness import assert_every_live_job_can_wake, messages_in_queues

#: The module's fixtures (pytest finds them by name).
FIXTURES = (api, app, failing)


def held_jobs(app: Leasehold, api: ApiClient) -> tuple[dict[str, str], str, str]:
    """One job held each way, all admitted under the tenant's live-job cap: parked on a full
    key, parked on a paused key, delayed by a throttle, an open debounce window, asleep
    holding a unique claim. Returns them by kind, the full key's holder and the throttle's."""
    held = {"held": "yes"}
    nap = post(api, "nap", 1, labels=held)
    deliver(app)
    assert app.store.get(nap).state is JobState.SLEEPING
    key_usage.pause(app, TENANT, "p")
    syncs = [post(api, "sync", i, labels=held) for i in range(2)]
    paused = post(api, "sync", 9, labels=held, concurrency={"key": "p", "limit": 1})
    calls = [post(api, "call", i, labels=held) for i in range(2)]
    leased = lease_visible(app)
    [holder] = [j for j in syncs if leased[j] == "leased"]
    [parked] = [j for j in syncs if leased[j] == "gated"]
    [turn] = [j for j in calls if leased[j] == "leased"]
    [delayed] = [j for j in calls if leased[j] == "gated"]
    assert leased[paused] == "gated"
    window = post(api, "plain", "w", labels=held, debounce={"key": "d", "seconds": 60},
                  start_within_seconds=600)
    jobs = {"parked": parked, "paused": paused, "throttled": delayed, "debounced": window,
            "sleeping": nap}
    shown = {kind: app.store.get(job_id) for kind, job_id in jobs.items()}
    assert all(job.state is JobState.QUEUED for kind, job in shown.items() if kind != "sleeping")
    assert shown["parked"].extra[waking.PARKED_KEY] and shown["paused"].extra[waking.PARKED_KEY]
    assert shown["throttled"].run_at > app.now()  # delayed to its turn
    return jobs, holder, turn


@pytest.mark.parametrize("path", ["cancel", "bulk cancel"])
def test_a_cancel_of_a_job_held_by_flow_control_or_asleep_gives_back_everything_it_holds(
        app: Leasehold, api: ApiClient, clock: FakeClock, path: str) -> None:
    """Cells (concurrency, throttle, debounce, unique, start window, durable sleep) x
    (cancel, bulk action): each held job ends CANCELLED at once (none of them is RUNNING),
    and gives back what it holds: its tenant's live-job slot, its place in the parked index,
    its unique claim; a debounce key's next submission opens a new window. The first write of each
    cancel lands and its response is lost."""
    jobs, holder, turn = held_jobs(app, api)
    assert tenant_live(app, TENANT) == 7
    injector = inject(app, Fault(target=WRITES, kind="lose", times=len(jobs),
                                 when=lambda params: "CANCELLED" in json.dumps(params)))
    if path == "cancel":
        for job_id in jobs.values():
            reply = api.delete(f"/jobs/{job_id}", tenant=TENANT)
            assert reply.status == 200, reply.body
    else:
        started = api.post("/jobs/bulk", {"action": "cancel", "filter": {
            "label": ["held:yes"], "state": ["QUEUED", "SLEEPING"]}}, tenant=TENANT)
        assert started.status == 202, started.body
        run_bulk(app, clock, started.body["bulk_id"])
    assert sum(n for (_, kind), n in injector.injected.items() if kind == "lose") == len(jobs)
    assert states(app, list(jobs.values())) == [JobState.CANCELLED] * len(jobs)
    # What they held is given back: live slots (exact), parked entries, the unique claim.
    assert tenant_live(app, TENANT) == live_counted_jobs(app, TENANT) == 2  # holder, turn
    assert states(app, [holder, turn]) == [JobState.RUNNING] * 2
    assert waking.parked(app, slot_id(TENANT, "k"), 10) == []
    assert waking.parked(app, slot_id(TENANT, "p"), 10) == []
    assert flow_item(app, TENANT, "unique", "nap") is None
    assert holders(app, "k") == {f"{holder}#{app.store.get(holder).epoch}"}
    # The sleeper's, the window's and the throttled job's messages are stale: nothing runs,
    # and the window's start window passing later changes nothing (CANCELLED, not EXPIRED).
    clock.advance(3600)
    ticker.promote_due(app)
    sweeper.sweep(app)
    deliver(app)
    assert states(app, list(jobs.values())) == [JobState.CANCELLED] * len(jobs)
    # The keys serve the next jobs: the debounce key opens a new window, the unique key is free.
    again = post(api, "plain", "w2", debounce={"key": "d", "seconds": 60})
    assert again != jobs["debounced"]
    assert post(api, "nap", 2) != jobs["sleeping"]
    assert_every_live_job_can_wake(app, in_flight=messages_in_queues(app))



@pytest.mark.parametrize("path", ["manual retry", "redrive", "bulk retry"])
def test_a_re_run_job_goes_through_its_keys_gate_and_spends_a_turn(
        app: Leasehold, api: ApiClient, clock: FakeClock, failing: dict[str, bool],
        monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """Cells (concurrency, throttle, unique) x (manual retry, redrive, bulk action): a DEAD
    job (its failure gave back its slot and its unique claim) put back live takes its claim
    back in the re-run's write and keeps its gate (on the row and in its new message), so it
    parks while its key is full and is delayed while its throttle is over the rate, as a
    submission would; it never runs around the gate, and once the holder is gone it runs and
    the slot is free. The holder's process dies: the sweeper's take-over frees the slot and
    wakes the parked re-run job."""
    no_delays(app, monkeypatch)
    failing.update({"0": True, "c": True})
    rerun_label = {"rerun": "yes"}
    dead = [post(api, "sync", 0, labels=rerun_label, unique={"key": "ru"}),
            post(api, "call", "c", labels=rerun_label)]
    deliver(app)
    assert states(app, dead) == [JobState.DEAD] * 2
    assert holders(app, "k") == set()  # the failure gave its slot back
    assert flow_item(app, TENANT, "unique", "ru") is None  # and its unique claim
    failing.clear()
    # Keyed, its row has a sweep entry (a job sent first is recovered by its message, after
    # the queue's visibility timeout, on SQS's clock rather than the test's).
    holder = post(api, "sync", 1, idempotency_key="holder")
    assert lease_visible(app) == {holder: "leased"}
    rerun(app, api, clock, path, dead)
    assert flow_item(app, TENANT, "unique", "ru") == {  # the re-run took its claim back
        "tenant": f"{TENANT}#unique#ru", "job_id": dead[0]}
    assert lease_visible(app) == {dead[0]: "gated", dead[1]: "gated"}
    sync, call = app.store.batch_get(dead)
    assert sync.state is JobState.QUEUED and sync.extra[waking.PARKED_KEY]
    assert call.state is JobState.QUEUED and call.run_at >= app.now() + 59_000  # its turn
    assert holders(app, "k") == {f"{holder}#{app.store.get(holder).epoch}"}
    assert_every_live_job_can_wake(app, in_flight=messages_in_queues(app))
    clock.advance(120)  # the holder's lease ran out: the sweeper takes it over
    sweeper.sweep(app)
    assert app.store.get(holder).state is not JobState.RUNNING
    for _ in range(4):
        deliver(app)
        sweeper.sweep(app)
    assert states(app, dead) == [JobState.SUCCEEDED] * 2
    assert holders(app, "k") == set()
    assert flow_item(app, TENANT, "unique", "ru") is None
    assert tenant_live(app, TENANT) == live_counted_jobs(app, TENANT)


def test_a_workflow_retry_re_runs_a_gated_step_through_its_key(
        app: Leasehold, api: ApiClient, clock: FakeClock, failing: dict[str, bool],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Cells (concurrency, throttle) x (workflow retry): a re-run step keeps its gate (the
    step's own throttle and its task's concurrency key): it is delayed to its throttle's
    next turn (its first run spent one), then parks while its key is full, never runs around
    either, and the workflow completes once the holder's slot is back."""
    no_delays(app, monkeypatch)
    failing["b"] = True
    graph = {"name": "gated", "steps": [
        {"id": "a", "task": "plain", "payload": "a"},
        {"id": "b", "task": "sync", "payload": "b", "depends_on": ["a"],
         "throttle": {"key": "wf", "limit": 1, "period_seconds": 60}},
    ]}
    wid = api.post("/workflows", graph, tenant=TENANT).body["workflow_id"]
    for _ in range(3):
        deliver(app)
    assert api.get(f"/workflows/{wid}", tenant=TENANT).body["state"] == "FAILED"
    failing.clear()
    holder = post(api, "sync", 1, idempotency_key="holder")  # swept: see above
    assert lease_visible(app) == {holder: "leased"}
    again = api.post(f"/workflows/{wid}/retry", tenant=TENANT)
    assert again.status == 200, again.body
    step = step_job_id(wid, "b", TENANT)
    assert lease_visible(app) == {step: "gated"}
    delayed = app.store.get(step)
    assert delayed.state is JobState.QUEUED and delayed.run_at > app.now()  # its next turn
    clock.advance(60)
    assert lease_visible(app) == {step: "gated"}  # its turn came: now the key is full
    parked = app.store.get(step)
    assert parked.state is JobState.QUEUED and parked.extra[waking.PARKED_KEY]
    assert holders(app, "k") == {f"{holder}#{app.store.get(holder).epoch}"}
    clock.advance(60)  # the holder's process died: the sweeper takes its slot back
    for _ in range(3):
        sweeper.sweep(app)
        deliver(app)
    done = api.get(f"/workflows/{wid}", tenant=TENANT).body
    assert done["state"] == "SUCCEEDED", done
    assert holders(app, "k") == set()


def test_each_end_of_an_attempt_gives_back_its_slot_and_each_retry_waits_for_its_turn(
        app: Leasehold, api: ApiClient, registry: TaskRegistry, clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Cells (concurrency, throttle, unique) x (failure, retry, timeout, cancel, sweep,
    success): an attempt
    that fails, and one that times out, give their slot back in the write that schedules the
    retry; each retry goes through the gate again and spends a turn of the throttle (no
    attempt starts before its turn); its unique claim is held through the retries and goes
    with the success. A cancel requested on a holder whose worker is gone ends
    it CANCELLED at the sweep, which gives its slot back and wakes the job parked behind it."""
    no_delays(app, monkeypatch)
    starts: list[int] = []

    claims: list[str | None] = []

    # 3 s: the second attempt waits out its timeout in real time; a shorter one let a loaded
    # machine's third attempt (a read inside the handler) run past it too, ending DEAD.
    @registry.task("gated", retry=FAST, max_attempts=3, timeout_seconds=3,
                   concurrency={"key": "g", "limit": 1}, unique={"key": "gu"},
                   throttle={"key": "gt", "limit": 1, "period_seconds": 10, "burst": 1})
    def gated(payload: Any, ctx: JobContext) -> Any:
        starts.append(app.now())
        claims.append((flow_item(app, TENANT, "unique", "gu") or {}).get("job_id"))
        if ctx.attempt == 1:
            raise ValueError("the first attempt fails")
        if ctx.attempt == 2:
            ctx.wait_cancelled(10)  # the worker gives up on it at its timeout
        return "third time"

    job = post(api, "gated", None)
    for _ in range(6):  # a message that comes before its turn waits for it on the clock
        deliver(app)
    done = app.store.get(job)
    assert (done.state, done.attempt, done.result) == (JobState.SUCCEEDED, 3, "third time")
    assert [e["type"] for e in done.extra["attempt_errors"]] == ["ValueError", "AttemptTimeout"]
    # Each retry parked on nothing: the slot its attempt held was back (limit 1: a slot kept
    # would park the retry behind itself for good), and it started at its turn, not before.
    assert [b - a for a, b in itertools.pairwise(starts)] == [10_000, 10_000]
    assert holders(app, "g") == set()
    # Its unique claim was held through every retry and went with its success.
    assert claims == [job] * 3 and flow_item(app, TENANT, "unique", "gu") is None
    # A holder whose worker is gone, cancelled: the sweep ends it and wakes the parked job.
    clock.advance(10)
    holder, parked = post(api, "sync", "h", unique={"key": "h"}), post(api, "sync", "p")
    leased = lease_visible(app)
    assert sorted(leased.values()) == ["gated", "leased"]
    holder, parked = (holder, parked) if leased[holder] == "leased" else (parked, holder)
    assert api.delete(f"/jobs/{holder}", tenant=TENANT).body["cancel_requested"] is True
    clock.advance(120)
    sweeper.sweep(app)
    assert app.store.get(holder).state is JobState.CANCELLED
    assert flow_item(app, TENANT, "unique", "h") is None  # the sweep's end freed its claim
    deliver(app)
    assert app.store.get(parked).state is JobState.SUCCEEDED
    assert holders(app, "k") == set()
    assert tenant_live(app, TENANT) == live_counted_jobs(app, TENANT) == 0


@pytest.mark.parametrize("path", ["manual retry", "redrive", "bulk retry"])
def test_a_job_re_run_by_hand_gets_its_deadline_again_from_the_re_run(
        app: Leasehold, api: ApiClient, clock: FakeClock, failing: dict[str, bool],
        path: str) -> None:
    """Cells (deadline, start window) x (manual retry, redrive, bulk action): a re-run is
    asked for now, so a deadline that passed while the job lay DEAD or CANCELLED does not end
    it at once: it counts again, as long as it was, from the re-run (the re-run's own write
    sets it), and still bounds the re-run. A start window of old is gone (a manual retry of a
    job cancelled before its window closed runs after it closed). Before, the re-run's lease
    found the old deadline passed and ended the job DEAD (DeadlineExceeded) without running
    it: the retry answered 200 and did nothing."""
    failing["d"] = True
    job = post(api, "plain", "d", deadline_seconds=30, labels={"rerun": "yes"},
               max_attempts=1)
    deliver(app)
    assert app.store.get(job).state is JobState.DEAD
    windowed = post(api, "plain", "w", start_within_seconds=10, labels={"rerun": "yes"})
    assert api.delete(f"/jobs/{windowed}", tenant=TENANT).status == 200
    clock.advance(3600)  # both the deadline and the start window are long past
    failing.clear()
    rerun(app, api, clock, path, [job] if path == "redrive" else [job, windowed])
    again = app.store.get(job)
    assert again.extra["deadline_at"] == app.now() + 30_000
    deliver(app)
    done = app.store.get(job)
    assert (done.state, done.result, done.error) == (JobState.SUCCEEDED, "d", None)
    if path != "redrive":  # a redrive takes DEAD jobs only
        assert app.store.get(windowed).state is JobState.SUCCEEDED
    # The deadline it got again still bounds it: a re-run that waits past it ends DEAD.
    late = post(api, "plain", "late", deadline_seconds=30, max_attempts=1)
    failing["late"] = True
    deliver(app)
    assert api.post(f"/jobs/{late}/retry", tenant=TENANT).status == 200
    clock.advance(31)
    deliver(app)
    ended = app.store.get(late)
    assert (ended.state, ended.error and ended.error.type) == (JobState.DEAD,
                                                              "DeadlineExceeded")


@pytest.mark.parametrize("path", ["manual retry", "redrive", "bulk retry"])
def test_a_debounce_window_re_run_by_hand_is_not_a_window_again(
        app: Leasehold, api: ApiClient, clock: FakeClock, failing: dict[str, bool],
        monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """Cells (debounce) x (manual retry, redrive, bulk action): a re-run is its own payload,
    run now. Before, the re-run's write made the row look like an open window again (QUEUED,
    no attempt, never started) while the key's pointer still named it, so the next
    submission with the key joined it: the payload the re-run was asked for was replaced and
    never ran, and the re-run was pushed out by the debounce delay."""
    no_delays(app, monkeypatch)
    failing["w1"] = True
    window = post(api, "plain", "w1", debounce={"key": "d", "seconds": 60},
                  labels={"rerun": "yes"}, max_attempts=1)
    clock.advance(60)
    deliver(app)
    assert app.store.get(window).state is JobState.DEAD
    failing.clear()
    rerun(app, api, clock, path, [window])
    reply = api.post("/jobs", {"task": "plain", "payload": "w2",
                               "debounce": {"key": "d", "seconds": 60}}, tenant=TENANT)
    assert reply.status == 201 and reply.body["job_id"] != window, reply.body
    re_run = app.store.get(window)
    assert (re_run.payload_json, re_run.run_at) == ('"w1"', app.now())
    deliver(app)
    assert (app.store.get(window).state, app.store.get(window).result) == (
        JobState.SUCCEEDED, "w1")
    clock.advance(60)
    deliver(app)
    assert app.store.get(reply.body["job_id"]).result == "w2"


def test_a_workflow_step_takes_no_unique_debounce_start_window_or_deadline(
        app: Leasehold, api: ApiClient, registry: TaskRegistry) -> None:
    """Cells (unique, debounce, start window, deadline) x (workflow retry): none of them
    reaches a step, so a workflow retry never meets one. A step answered by another job
    (unique) or folded into one (debounce) would leave its graph waiting for a job that is
    not its own, and a step's time is its workflow's: each is refused at POST /workflows
    (422, nothing written), and a step's task's own unique and start-window defaults do not
    apply to the step (two steps of one unique task both run)."""
    @registry.task("only_one", unique={"key": "one"}, start_within_seconds=1)
    def only_one(payload: Any, ctx: JobContext) -> Any:
        return payload

    for field, value in [("unique", {"key": "u"}), ("debounce", {"key": "d", "seconds": 5}),
                         ("start_within_seconds", 5), ("deadline_seconds", 5)]:
        refused = api.post("/workflows", {"name": "w", "steps": [
            {"id": "a", "task": "plain", field: value}]}, tenant=TENANT)
        assert refused.status == 422, refused.body
        assert refused.body["error"]["field"] == f"steps[0].{field}"
    assert api.get("/workflows", tenant=TENANT).body["workflows"] == []
    made = api.post("/workflows", {"name": "w", "steps": [
        {"id": "a", "task": "only_one", "payload": 1},
        {"id": "b", "task": "only_one", "payload": 2}]}, tenant=TENANT)
    assert made.status == 201, made.body
    for _ in range(3):
        deliver(app)
    done = api.get(f"/workflows/{made.body['workflow_id']}", tenant=TENANT).body
    assert (done["state"], [s["result"] for s in done["steps"]]) == ("SUCCEEDED", [1, 2])


def test_a_debounce_window_whose_message_was_lost_is_handed_off_by_the_sweeper(
        app: Leasehold, api: ApiClient, clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Cell (debounce) x (sweep): a join that pushes a window out bumps its epoch (the first
    message is stale) and sends a new delayed message; that send fails past its retries. The
    window is a QUEUED row with a hand-off deadline from its fire time: the sweeper re-sends it
    then, and it runs once, with the latest payload."""
    no_delays(app, monkeypatch)
    window = post(api, "plain", "first", debounce={"key": "d", "seconds": 60})
    clock.advance(30)
    injector = inject(app, Fault(target="sqs.SendMessage", kind="fail"))
    joined = api.post("/jobs", {"task": "plain", "payload": "latest",
                                "debounce": {"key": "d", "seconds": 60}}, tenant=TENANT)
    assert (joined.body["job_id"], joined.body["coalesced"]) == (window, True), joined.body
    assert injector.injected[("sqs.SendMessage", "fail")] == 1
    pushed = app.store.get(window)
    assert pushed.run_at == app.now() + 60_000
    deliver(app)  # only the first, stale message is there: nothing runs
    assert app.store.get(window).state is JobState.QUEUED
    clock.advance(60 + app.settings.handoff_seconds + app.settings.skew_grace_seconds + 1)
    assert sweeper.sweep(app).redispatched == 1
    deliver(app)
    done = app.store.get(window)
    assert (done.state, done.result, done.attempt) == (JobState.SUCCEEDED, "latest", 1)


def test_a_debounce_key_whose_last_window_was_deleted_opens_a_new_one(
        app: Leasehold, api: ApiClient, clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Cells (debounce) x (retention, bulk action): a key's pointer is never released, so it
    can name a row that retention or a bulk delete removed; the next submission finds no
    window there and opens a new one (it does not fail, nor join anything)."""
    no_delays(app, monkeypatch)
    first = post(api, "plain", "first", debounce={"key": "d", "seconds": 5})
    clock.advance(5)
    deliver(app)
    assert app.store.get(first).state is JobState.SUCCEEDED
    bulk = api.post("/jobs/bulk", {"action": "delete"}, tenant=TENANT).body["bulk_id"]
    run_bulk(app, clock, bulk)
    assert app.store.batch_get([first]) == []
    assert flow_item(app, TENANT, "debounce", "d") == {"tenant": f"{TENANT}#debounce#d",
                                                       "job_id": first}
    reply = api.post("/jobs", {"task": "plain", "payload": "second",
                               "debounce": {"key": "d", "seconds": 5}}, tenant=TENANT)
    assert reply.status == 201 and reply.body["coalesced"] is False, reply.body
    clock.advance(5)
    deliver(app)
    assert app.store.get(reply.body["job_id"]).result == "second"


def test_a_retry_due_past_the_deadline_ends_dead_at_its_lease_without_running(
        app: Leasehold, registry: TaskRegistry, clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Cell (deadline) x (retry): a retry whose backoff reaches past the job's deadline is
    not run: its lease finds the deadline passed and ends the job DEAD with
    DeadlineExceeded (never retried again)."""
    from leasehold.core.spec import JobSpec
    from leasehold.lifecycle.submission import submit

    no_delays(app, monkeypatch)
    runs: list[int] = []

    @registry.task("slow_retry", max_attempts=5,
                   retry=RetryPolicy(min_backoff_seconds=120, max_backoff_seconds=120))
    def slow_retry(payload: Any, ctx: JobContext) -> Any:
        runs.append(ctx.attempt)
        raise ValueError("fails")

    job = submit(app, JobSpec(task="slow_retry", deadline_seconds=60)).job.job_id
    deliver(app, once=True)
    retrying = app.store.get(job)
    assert retrying.state in (JobState.QUEUED, JobState.SCHEDULED)
    assert retrying.run_at > retrying.extra["deadline_at"]
    clock.advance(200)
    ticker.promote_due(app)
    sweeper.sweep(app)
    deliver(app)
    dead = app.store.get(job)
    assert (dead.state, dead.error and dead.error.type) == (JobState.DEAD, "DeadlineExceeded")
    assert runs == [1]


def test_a_job_held_by_its_key_past_its_deadline_ends_dead_at_the_next_sweep(
        app: Leasehold, api: ApiClient, clock: FakeClock) -> None:
    """Cell (deadline) x (sweep): a job parked on a full key past its deadline should end
    DEAD (DeadlineExceeded) at the sweep that rechecks it, giving back its live slot, as a
    start window's job ends EXPIRED (its hand-off deadline is never later than its
    deadline, so the sweeper looks at it then)."""
    holder = post(api, "sync", "holder")
    waiting = post(api, "sync", "waiting", deadline_seconds=60)
    leased = lease_visible(app, lease_ms=3_600_000)  # the holder keeps its slot an hour
    assert leased == {holder: "leased", waiting: "gated"}
    for _ in range(4):  # rechecks past the deadline
        clock.advance(40)
        sweeper.sweep(app)
        lease_visible(app)
    ended = app.store.get(waiting)
    assert (ended.state, ended.error and ended.error.type) == (JobState.DEAD,
                                                              "DeadlineExceeded")
    assert tenant_live(app, TENANT) == 1  # the holder's only
