"""Concurrency keys through the real store, queues and worker (moto), with a fixed clock.

A slot is taken with the lease and given back by the change that ends the attempt; a job over
the limit is parked (no message anywhere) and woken by the write that frees a slot; the
sweeper takes a crashed holder's slot back and hands off a parked job whose wake-up was lost.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.aws.queues import Message, Received
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.flowcontrol import slot_id
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import ValidationError
from leasehold.flow import key_usage, slots, waking
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change, Gated
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Delivery, Outcome, Worker
from tests.conftest import MakeApp
from tests.integration.helpers import deliver, inject, receive_all, submit_swept
from tests.integration.liveness import (
    WakePath,
    assert_every_live_job_can_wake,
    messages_in_queues,
)

KEY = {"key": "acct:{payload.account}", "limit": 2}


@pytest.fixture
def app(make_app: MakeApp, registry: TaskRegistry) -> Leasehold:
    @registry.task("sync", concurrency=KEY)
    def sync(payload: Any, ctx: JobContext) -> Any:
        return payload

    registry.task("plain")(sync)
    return make_app()


def holders(app: Leasehold, tenant: str, key: str) -> set[str]:
    return slots.holders(slots.read(app.clients.dynamodb, app.settings, slot_id(tenant, key)))


def lease_all(app: Leasehold, messages: list[Received] | None = None) -> dict[str, Outcome]:
    """Lease every visible message (or ``messages``) without running or finishing anything."""
    out = {}
    lease_ms = int(app.settings.lease_seconds * 1000)
    for message in receive_all(app) if messages is None else messages:
        parsed = Message.parse(message.body)
        try:
            app.store.lease(parsed.job_id, parsed.epoch, owner="w", expires_at=app.now() + lease_ms,
                            now=app.now(), actor="w", gate=parsed.gate)
            out[parsed.job_id] = Outcome.SUCCEEDED
        except Gated:
            out[parsed.job_id] = Outcome.GATED
    return out


def test_a_key_runs_at_most_its_limit_and_parks_the_rest(app: Leasehold) -> None:
    ids = [submit(app, JobSpec(task="sync", payload={"account": "a"})).job.job_id
           for _ in range(4)]
    outcomes = lease_all(app)
    assert sorted(outcomes.values()) == sorted([Outcome.SUCCEEDED] * 2 + [Outcome.GATED] * 2)
    jobs = {j.job_id: j for j in app.store.batch_get(ids)}
    running = [j for j in jobs.values() if j.state is JobState.RUNNING]
    parked = [j for j in jobs.values() if j.extra.get(waking.PARKED_KEY)]
    assert len(running) == 2 and len(parked) == 2
    assert holders(app, "default", "acct:a") == {f"{j.job_id}#{j.epoch}" for j in running}
    assert parked[0].extra[waking.WAITING] == "waiting for a slot of key acct:a (2 of 2 in use)"
    assert receive_all(app) == []  # parked: no message anywhere, nothing polls


def test_the_write_that_ends_an_attempt_frees_the_slot_and_wakes_the_oldest(
        app: Leasehold) -> None:
    ids = [submit(app, JobSpec(task="sync", payload={"account": "a"})).job.job_id
           for _ in range(5)]
    worker = Worker(app)
    # Each delivery runs what it leases to the end: two at a time, the rest parked and woken
    # one by one by the finishing writes, until all are done.
    for _ in range(10):
        if not deliver(app, worker):
            break
    assert all(j.state is JobState.SUCCEEDED for j in app.store.batch_get(ids))
    assert holders(app, "default", "acct:a") == set()
    assert waking.parked(app, slot_id("default", "acct:a"), 10) == []


def test_keys_are_per_tenant_and_per_rendered_key(app: Leasehold) -> None:
    for tenant, account in [("t1", "a"), ("t1", "a"), ("t1", "b"), ("t2", "a")]:
        submit(app, JobSpec(task="sync", payload={"account": account}, tenant=tenant))
    outcomes = lease_all(app)
    assert list(outcomes.values()).count(Outcome.SUCCEEDED) == 4
    assert len(holders(app, "t1", "acct:a")) == 2
    assert len(holders(app, "t2", "acct:a")) == 1


def test_a_job_value_overrides_the_task_default_and_a_missing_field_is_refused(
        app: Leasehold) -> None:
    job = submit(app, JobSpec(task="sync", payload={"account": "a"},
                              concurrency={"key": "mine", "limit": 1})).job
    assert job.extra["lease_gate"]["concurrency"] == {
        "key": "mine", "slot": "default#flow#mine", "limit": 1}
    with pytest.raises(ValidationError, match="no field 'account'"):
        submit(app, JobSpec(task="sync", payload={"other": 1}))
    plain = submit(app, JobSpec(task="plain", payload={})).job
    assert "lease_gate" not in plain.extra


def test_a_crashed_holder_s_slot_comes_back_at_the_sweep_that_takes_it_over(
        app: Leasehold, clock: Any) -> None:
    for _ in range(3):
        submit_swept(app, JobSpec(task="sync", payload={"account": "a"}))
    lease_all(app)  # two held by a worker that dies now; one parked
    assert len(holders(app, "default", "acct:a")) == 2
    clock.advance(app.settings.lease_seconds + app.settings.skew_grace_seconds + 1)
    sweeper.sweep(app)  # takes both over (their slots back) and wakes the parked job
    assert holders(app, "default", "acct:a") == set()
    assert len(receive_all(app)) == 3  # two re-driven, one woken


def test_a_crashed_holder_sent_first_gives_its_slot_back_when_its_message_comes_back(
        app: Leasehold, clock: Any) -> None:
    # Plain submissions (issue 46): no sweep entry; the holders' messages are their sweeper.
    for _ in range(3):
        submit(app, JobSpec(task="sync", payload={"account": "a"}))
    messages = receive_all(app)
    outcomes = lease_all(app, messages)  # two held by a worker that dies now; one parked
    assert len(holders(app, "default", "acct:a")) == 2
    clock.advance(app.settings.lease_seconds + app.settings.skew_grace_seconds + 1)
    # Nothing in the index names the holders (only the parked job's recheck is there).
    assert sweeper.sweep(app).recovered == 0
    assert len(holders(app, "default", "acct:a")) == 2
    held = [m for m in messages if outcomes[Message.parse(m.body).job_id] is Outcome.SUCCEEDED]
    for message in held:  # their visibility timeout ends: the next worker takes them over
        app.queues.extend(message.queue_url, message.receipt_handle, 0)
    deliver(app)  # re-driven (slots back), then run; the parked job woken and run
    assert holders(app, "default", "acct:a") == set()
    assert {app.store.get(Message.parse(m.body).job_id).state for m in messages} == \
        {JobState.SUCCEEDED}


def test_a_parked_job_whose_wake_up_was_lost_is_handed_off_by_the_sweeper(
        app: Leasehold, clock: Any) -> None:
    ids = [submit(app, JobSpec(task="sync", payload={"account": "a"})).job.job_id
           for _ in range(3)]
    lease_all(app)
    running = [j for j in app.store.batch_get(ids) if j.state is JobState.RUNNING]
    parked_id = next(j.job_id for j in app.store.batch_get(ids) if j.state is JobState.QUEUED)
    # The process that frees the slot dies between its commit and the wake-up.
    app.store.observers[:] = [o for o in app.store.observers
                              if not isinstance(o, waking.Waker)]
    app.store.transition(running[0], Change(target=JobState.SUCCEEDED, actor="w", owner="w"),
                         now=app.now())
    assert receive_all(app) == []
    clock.advance(app.settings.flow_recheck_seconds + app.settings.skew_grace_seconds + 1)
    sweeper.sweep(app)
    deliver(app)
    assert app.store.get(parked_id).state is JobState.SUCCEEDED


def test_a_lost_response_on_the_lease_neither_leaks_nor_doubles_a_slot(
        app: Leasehold) -> None:
    ids = [submit(app, JobSpec(task="sync", payload={"account": "a"})).job.job_id
           for _ in range(2)]
    inject(app, Fault(target="dynamodb.TransactWriteItems", kind="lose", times=4))
    deliver(app)
    assert all(j.state is JobState.SUCCEEDED for j in app.store.batch_get(ids))
    assert holders(app, "default", "acct:a") == set()


# -- a durable sleep that wakes while its key is full (issue 29) ---------------------------

NAP_KEY = {"key": "nap", "limit": 1}


def napping(app: Leasehold, registry: TaskRegistry) -> tuple[str, str, Received]:
    """A durable job on key ``nap`` asleep for half a second, its wake-up message taken by a
    worker, and another job of the key RUNNING meanwhile (it holds the only slot): (the
    sleeper's id, the holder's id, the wake-up message)."""
    nap = submit(app, JobSpec(task="nap", payload={})).job
    deliver(app, once=True)  # runs up to ctx.sleep: SLEEPING, its wake-up handed off
    assert app.store.get(nap.job_id).state is JobState.SLEEPING
    [wake] = receive_all(app)
    holder = submit_swept(app, JobSpec(task="hold", payload={})).job
    [handoff] = receive_all(app)
    assert lease_all(app, [handoff]) == {holder.job_id: Outcome.SUCCEEDED}
    app.queues.delete(handoff.queue_url, [handoff.receipt_handle])
    return nap.job_id, holder.job_id, wake


@pytest.fixture
def naps(registry: TaskRegistry) -> list[str]:
    runs: list[str] = []

    @registry.task("nap", concurrency=NAP_KEY)
    def nap(payload: Any, ctx: JobContext) -> Any:
        runs.append("run")
        ctx.sleep(0.5)
        runs.append("after")
        return "rested"

    @registry.task("hold", concurrency=NAP_KEY)
    def hold(payload: Any, ctx: JobContext) -> Any:
        return None

    return runs


def process(app: Leasehold, message: Received) -> Outcome:
    """A worker handles ``message`` and acknowledges it, as its consumer does."""
    outcome = Worker(app).process(Delivery(message.body))
    app.queues.delete(message.queue_url, [message.receipt_handle])
    return outcome


def kinds(paths: list[WakePath]) -> set[str]:
    return {path.kind for path in paths}


def is_write_of(text: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda params: text in json.dumps(params)


def test_a_sleeper_woken_while_its_key_is_full_parks_and_starts_when_the_slot_frees(
        app: Leasehold, registry: TaskRegistry, naps: list[str]) -> None:
    nap_id, holder_id, wake = napping(app, registry)
    # Lost responses on the parking and on the wake-up: each retry meets its own write.
    injector = inject(app, Fault(target="dynamodb.TransactWriteItems", kind="lose",
                                 when=is_write_of(waking.PARKED_KEY)),
                      Fault(target="dynamodb.UpdateItem", kind="lose",
                            when=is_write_of("woken")))
    assert process(app, wake) is Outcome.GATED
    parked = app.store.get(nap_id)
    # Parked as a QUEUED job is: no message anywhere, woken by the slot's release.
    assert parked.state is JobState.QUEUED
    assert parked.extra[waking.PARKED_KEY] == slot_id("default", "nap")
    assert parked.extra[waking.WAITING] == "waiting for a slot of key nap (1 of 1 in use)"
    live = assert_every_live_job_can_wake(app, in_flight=messages_in_queues(app))
    assert kinds(live[nap_id]) == {"parked", "sweep"}
    holder = app.store.get(holder_id)
    app.store.transition(holder, Change(target=JobState.SUCCEEDED, actor="w", owner="w"),
                         now=app.now())  # frees the slot: the sleeper is woken at once
    assert "message" in kinds(assert_every_live_job_can_wake(
        app, in_flight=messages_in_queues(app))[nap_id])
    assert sorted(injector.injected.values()) == [1, 1]  # both responses were lost
    deliver(app)
    done = app.store.get(nap_id)
    assert (done.state, done.result, done.attempt) == (JobState.SUCCEEDED, "rested", 1)
    assert naps == ["run", "run", "after"]  # the sleep is not done twice
    assert holders(app, "default", "nap") == set()


def test_a_sleeper_parked_on_a_full_key_is_handed_off_by_the_sweeper_when_the_waker_dies(
        app: Leasehold, registry: TaskRegistry, naps: list[str], clock: FakeClock) -> None:
    nap_id, holder_id, wake = napping(app, registry)
    assert process(app, wake) is Outcome.GATED
    # The process that frees the slot is killed between its commit and the wake-up.
    injector = inject(app, Fault(target="dynamodb.Query", kind="crash",
                                 when=is_write_of(waking.PARKED_KEY)))
    with contextlib.suppress(InjectedCrash):
        app.store.transition(app.store.get(holder_id),
                             Change(target=JobState.SUCCEEDED, actor="w", owner="w"),
                             now=app.now())
    assert injector.dead
    injector.revive()  # a new process: the slot was given back, the wake-up never made
    assert holders(app, "default", "nap") == set()
    assert receive_all(app) == []  # nobody woke it: the sweeper's recheck will
    live = assert_every_live_job_can_wake(app, in_flight=messages_in_queues(app))
    assert kinds(live[nap_id]) == {"parked", "sweep"}
    clock.advance(app.settings.flow_recheck_seconds + app.settings.skew_grace_seconds + 1)
    assert nap_id in sweeper.sweep(app).job_ids  # one recheck period, not a hand-off's 15 min
    deliver(app)
    assert app.store.get(nap_id).state is JobState.SUCCEEDED
    assert naps == ["run", "run", "after"]


def test_a_sleeper_woken_while_its_key_is_paused_parks_and_starts_on_resume(
        app: Leasehold, registry: TaskRegistry, naps: list[str]) -> None:
    nap = submit(app, JobSpec(task="nap", payload={})).job
    deliver(app, once=True)  # runs up to ctx.sleep
    key_usage.pause(app, "default", "nap")
    deliver(app)  # its wake-up: refused by the pause
    parked = app.store.get(nap.job_id)
    assert parked.state is JobState.QUEUED
    assert parked.extra[waking.WAITING] == "paused: key nap is paused"
    live = assert_every_live_job_can_wake(app, in_flight=messages_in_queues(app))
    assert kinds(live[nap.job_id]) == {"parked", "sweep"}
    key_usage.resume(app, "default", "nap")  # wakes it: the key has a free slot
    deliver(app)
    assert app.store.get(nap.job_id).state is JobState.SUCCEEDED
    assert naps == ["run", "run", "after"]


def test_a_paused_parked_job_passes_its_key_s_wake_up_to_the_next_that_can_start(
        make_app: MakeApp, registry: TaskRegistry, clock: FakeClock) -> None:
    """Limit 1, a holder and two parked jobs, the older one paused: the holder's end wakes
    the younger one, not the paused one (whose lease the hold would refuse, leaving the key
    free and the other job parked until the sweeper's recheck)."""
    from leasehold.lifecycle import pausing

    registry.task("one", concurrency={"key": "k", "limit": 1})(lambda payload, ctx: payload)
    app = make_app()
    ids = [submit(app, JobSpec(task="one", payload={"n": n})).job.job_id for n in range(3)]
    for message in receive_all(app):  # one holder; the others park a second apart
        lease_all(app, [message])
        clock.advance(1)
    jobs = app.store.batch_get(ids)
    [holder] = [j for j in jobs if j.state is JobState.RUNNING]
    older, younger = sorted((j for j in jobs if j.extra.get(waking.PARKED_KEY)),
                            key=lambda j: int(j.extra[waking.PARKED_AT]))
    pausing.pause(app, older.job_id)
    app.store.transition(holder, Change(target=JobState.SUCCEEDED, actor="w", owner="w",
                                        set={"finished_at": app.now()}), now=app.now())
    woken = receive_all(app)
    assert [Message.parse(m.body).job_id for m in woken] == [younger.job_id]
    assert lease_all(app, woken) == {younger.job_id: Outcome.SUCCEEDED}
    still = app.store.get(older.job_id)  # still parked, still paused: its resume wakes it
    assert still.state is JobState.QUEUED and still.extra.get(waking.PARKED_KEY)
