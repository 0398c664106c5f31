"""The lease protocol's fences, each alone: a job handed off again for a new attempt is leased
only by that hand-off's message, never by a copy of an earlier one (SQS delivers at least
once, and the sweeper re-sends a message it presumes lost); and a worker whose lease was taken
over can neither extend nor finish the lease its successor holds while that one still runs.
(The mutant set, tests/mutants, puts each fence's bug back against these tests.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import LeaseholdError, LeaseLost
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Change
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Delivery, Outcome, Worker

from .helpers import inject, receive_all, submit_swept


def test_a_copy_of_the_first_attempts_message_never_leases_the_retry(
        app: Leasehold, registry: TaskRegistry) -> None:
    runs: list[int] = []

    @registry.task("flaky", retry=RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0.1))
    def flaky(payload: Any, ctx: JobContext) -> Any:
        runs.append(ctx.attempt)
        if ctx.attempt == 1:
            raise ConnectionError("transient")
        return "ok"

    job = submit(app, JobSpec(task="flaky")).job
    [first] = receive_all(app)
    # The retry's write lands and its answer is lost once: botocore sends it again.
    injector = inject(app, Fault(target="dynamodb.UpdateItem|dynamodb.TransactWriteItems",
                                 kind="lose", times=1))
    assert Worker(app).process(Delivery(first.body)) is Outcome.RETRYING
    retried = app.store.get(job.job_id)
    assert retried.state is JobState.QUEUED and retried.epoch > job.epoch
    # A copy of the first message (redelivered, or re-sent) meets the retry: stale.
    assert Worker(app).process(Delivery(first.body)) is Outcome.STALE
    assert runs == [1]
    [second] = receive_all(app)
    assert Worker(app).process(Delivery(second.body)) is Outcome.SUCCEEDED
    assert runs == [1, 2]
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    assert sum(injector.injected.values()) == 1  # the lost answer did happen


def test_a_zombie_can_neither_heartbeat_nor_finish_while_its_successor_runs(
        app: Leasehold, registry: TaskRegistry, clock: FakeClock) -> None:
    registry.task("echo")(lambda payload, ctx: payload)
    job = submit_swept(app, JobSpec(task="echo")).job
    [first] = receive_all(app)
    lease_ms = int(app.settings.lease_seconds * 1000)
    zombie = app.store.lease(job.job_id, json.loads(first.body)["epoch"], owner="old",
                             expires_at=app.now() + lease_ms, now=app.now(), actor="old")
    clock.advance(app.settings.lease_seconds + app.settings.skew_grace_seconds + 1)
    assert sweeper.sweep(app).recovered == 1  # the old worker went quiet past its lease
    [second] = receive_all(app)
    current = app.store.lease(job.job_id, json.loads(second.body)["epoch"], owner="new",
                              expires_at=app.now() + lease_ms, now=app.now(), actor="new")
    assert current.epoch > zombie.epoch
    # The old worker wakes while the new one still runs: its heartbeat and its finish are
    # refused, with a lost answer on each (botocore sends the refused write again).
    inject(app, Fault(target="dynamodb.UpdateItem|dynamodb.TransactWriteItems", kind="lose",
                      times=2))
    with pytest.raises(LeaseLost):
        app.store.update_running(zombie, owner="old", conflict=LeaseLost,
                                 set={"lease_expires_at": app.now() + 10 * lease_ms})
    with pytest.raises(LeaseholdError):
        app.store.transition(zombie, Change(
            target=JobState.SUCCEEDED, actor="old", owner="old",
            set={"result": '"zombie"', "finished_at": app.now()}), now=app.now())
    row = app.store.get(job.job_id)
    assert (row.state, row.epoch, row.lease_owner, row.lease_expires_at, row.result_json) == (
        JobState.RUNNING, current.epoch, "new", current.lease_expires_at, None)
