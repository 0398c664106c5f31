"""Random interleavings of deliveries, duplicates, crashes, zombies, sweeps and clock jumps.

After every step: no job lost, none SUCCEEDED twice, every lease grant fenced by a newer epoch
than the last, attempts never above their limit. At the end everything drains to a terminal
state.
"""

from __future__ import annotations

import json
import random
import uuid
from collections import Counter, defaultdict
from typing import Any

import pytest
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from moto import mock_aws

from leasehold.aws.clients import Clients
from leasehold.aws.provision import create_all
from leasehold.aws.queues import Received
from leasehold.clock import FakeClock
from leasehold.compose import compose
from leasehold.core.context import JobContext
from leasehold.core.jobs import Job
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import LeaseholdError, LeaseLost
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.store import Change
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Delivery, Worker
from leasehold.settings import Settings

# The whole state machine is one pytest test: under a loaded CI machine it can pass the
# suite's per-test timeout, which would fail it for time alone.
pytestmark = pytest.mark.timeout(1200)

MAX_ATTEMPTS = 4
LEASE_S = 30.0


class Lifecycle(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mock = mock_aws()
        self.mock.start()
        prefix = "s" + uuid.uuid4().hex[:8]
        settings_ = Settings(
            jobs_table=f"{prefix}-jobs", schedules_table=f"{prefix}-sch",
            tenants_table=f"{prefix}-ten", coordination_table=f"{prefix}-co",
            queue_prefix=prefix, shards=2, lease_seconds=LEASE_S, handoff_seconds=120,
            skew_grace_seconds=2, max_crash_recoveries=3,
        )
        clients = Clients(settings_)
        create_all(clients, settings_)
        self.clock = FakeClock()
        registry = TaskRegistry()
        self.runs: Counter[str] = Counter()

        @registry.task("work", retry=RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0.3),
                       max_attempts=MAX_ATTEMPTS)
        def work(payload: Any, ctx: JobContext) -> Any:
            self.runs[ctx.job_id] += 1
            if ctx.attempt <= payload["fail_first"]:
                raise RuntimeError(f"planned failure {ctx.attempt}")
            return ctx.attempt

        self.app = compose(settings_, clock=self.clock, registry=registry,
                                           clients=clients, rng=random.Random(0))
        self.succeeded: Counter[str] = Counter()
        self.grants: dict[str, list[int]] = defaultdict(list)
        #: Every job as the store last wrote it (observers see every change it makes).
        self.latest: dict[str, Job] = {}
        self.app.store.observers.append(self._observe)  # type: ignore[attr-defined]
        self.jobs: list[str] = []
        self.seen_bodies: list[str] = []
        self.zombies: list[tuple[Job, str]] = []
        self.url = self.app.queues.url("default", "normal")

    def _observe(self, job: Job, source: JobState | None) -> None:
        self.latest[job.job_id] = job
        if job.state is JobState.SUCCEEDED and source is JobState.RUNNING:
            self.succeeded[job.job_id] += 1
        if job.state is JobState.RUNNING and source is JobState.QUEUED:
            self.grants[job.job_id].append(job.epoch)

    def teardown(self) -> None:
        try:
            self._drain()
        finally:
            self.mock.stop()

    # -- rules --------------------------------------------------------------------------

    @initialize(fail_first=st.lists(st.integers(0, MAX_ATTEMPTS + 1), min_size=2, max_size=6))
    def some_jobs(self, fail_first: list[int]) -> None:
        for failures in fail_first:
            self.submit_job(failures, lose_send=False)

    @rule(fail_first=st.integers(0, MAX_ATTEMPTS + 1), lose_send=st.booleans())
    def submit_job(self, fail_first: int, lose_send: bool) -> None:
        if lose_send:  # the row is written, the SQS send fails: the outbox case
            original = self.app.queues.send

            def broken(*args: Any, **kwargs: Any) -> None:
                raise ClientError({"Error": {"Code": "InternalError", "Message": "x"}}, "Send")

            self.app.queues.send = broken  # type: ignore[method-assign]
            try:
                job = submit(self.app, JobSpec(task="work", payload={"fail_first": fail_first}))
            finally:
                self.app.queues.send = original  # type: ignore[method-assign]
        else:
            job = submit(self.app, JobSpec(task="work", payload={"fail_first": fail_first})).job
        self.jobs.append(job.job.job_id if hasattr(job, "job") else job.job_id)

    @rule(crashes=st.lists(st.booleans(), min_size=1, max_size=5))
    def deliver(self, crashes: list[bool]) -> None:
        """Workers take a batch; each message either runs to the end or its worker dies
        right after leasing (it may come back later as a zombie)."""
        batch = self.app.queues.receive(self.url, max_messages=len(crashes))
        self.seen_bodies += [m.body for m in batch]
        healthy = [m for m, crash in zip(batch, crashes, strict=False) if not crash]
        for message in batch:
            if message not in healthy:
                self._crash_after_lease(message)
        consume(Worker(self.app), healthy)

    def _crash_after_lease(self, message: Received) -> None:
        body = json.loads(message.body)
        now = self.app.now()
        owner = "crashed:" + uuid.uuid4().hex[:6]
        try:
            job = self.app.store.lease(body["job_id"], body["epoch"], owner=owner,
                                       expires_at=now + int(LEASE_S * 1000), now=now,
                                       actor="crashed")
        except LeaseholdError:
            return
        self.zombies.append((job, owner))

    @precondition(lambda self: self.seen_bodies)
    @rule(data=st.data())
    def duplicate_delivery(self, data: st.DataObject) -> None:
        body = data.draw(st.sampled_from(self.seen_bodies))
        Worker(self.app).process(Delivery(body))

    def _superseded(self) -> list[tuple[Job, str]]:
        return [(job, owner) for job, owner in self.zombies
                if self.grants[job.job_id][-1] != job.epoch]

    @precondition(lambda self: self.zombies)
    @rule(data=st.data(), superseded=st.booleans())
    def zombie_finishes(self, data: st.DataObject, superseded: bool) -> None:
        """A worker presumed dead wakes up and records success (often after a takeover)."""
        pool = (superseded and self._superseded()) or self.zombies
        job, owner = data.draw(st.sampled_from(pool))
        self.zombies.remove((job, owner))
        now = self.app.now()
        try:
            self.app.store.transition(
                job, Change(target=JobState.SUCCEEDED, actor="zombie", owner=owner,
                            unless_cancel_requested=True,
                            set={"result": '"zombie"', "finished_at": now}), now=now)
        except LeaseholdError:
            event("zombie finish refused" if self.grants[job.job_id][-1] != job.epoch
                  else "late finish refused (job moved on)")
            return
        event("late finish accepted")
        # Allowed only if its lease was never taken over: then it is simply late, not a zombie.
        assert self.grants[job.job_id][-1] == job.epoch

    @precondition(lambda self: self.zombies)
    @rule(data=st.data(), superseded=st.booleans())
    def zombie_heartbeats(self, data: st.DataObject, superseded: bool) -> None:
        """A worker presumed dead tries to extend its lease."""
        pool = (superseded and self._superseded()) or self.zombies
        job, owner = data.draw(st.sampled_from(pool))
        try:
            self.app.store.update_running(
                job, owner=owner, set={"lease_expires_at": self.app.now() + 30_000},
                conflict=LeaseLost)
        except LeaseLost:
            event("zombie heartbeat refused")
            return
        event("heartbeat accepted")
        assert self.grants[job.job_id][-1] == job.epoch  # only a lease never taken over

    @rule()
    def sweep(self) -> None:
        sweeper.sweep(self.app)

    @rule()
    def leases_expire_and_the_sweeper_runs(self) -> None:
        self.clock.advance(LEASE_S + self.app.settings.skew_grace_seconds + 1)
        sweeper.sweep(self.app)

    @rule(seconds=st.sampled_from([1, 5, 20, 40, 130]))
    def advance_clock(self, seconds: int) -> None:
        self.clock.advance(seconds)

    # -- invariants ---------------------------------------------------------------------

    @invariant()
    def nothing_succeeds_twice_and_leases_are_fenced(self) -> None:
        assert all(count == 1 for count in self.succeeded.values()), self.succeeded
        for epochs in self.grants.values():
            assert epochs == sorted(set(epochs)), epochs  # each grant at a newer epoch

    @invariant()
    def no_job_is_lost_and_attempts_stay_in_bounds(self) -> None:
        assert set(self.latest) == set(self.jobs)
        for job in self.latest.values():
            self._check(job)

    def _check(self, job: Job) -> None:
        assert job.attempt <= job.max_attempts
        if job.state in (JobState.QUEUED, JobState.RUNNING):
            # In the leases index: the sweeper will find it if its message is lost.
            assert job.lease_expires_at is not None
        else:
            assert job.state.terminal, job.state

    def _drain(self) -> None:
        for _ in range(40):
            if all(job.state.terminal for job in self.latest.values()):
                break
            self.clock.advance(max(LEASE_S, self.app.settings.handoff_seconds) + 5)
            sweeper.sweep(self.app)
            while batch := self.app.queues.receive(self.url, max_messages=10):
                consume(Worker(self.app), batch)
        jobs = self.app.store.batch_get(self.jobs)
        assert all(job.state.terminal for job in jobs), [(j.job_id, j.state) for j in jobs]
        # What the observers saw is what the table holds.
        assert {j.job_id: (j.state, j.epoch) for j in jobs} == {
            j.job_id: (j.state, j.epoch) for j in self.latest.values()}
        for job in jobs:
            self._check(job)
            if job.state is JobState.SUCCEEDED:
                assert self.succeeded[job.job_id] == 1
            assert job.attempt <= job.max_attempts
        self.nothing_succeeds_twice_and_leases_are_fenced()


TestLifecycle = Lifecycle.TestCase
TestLifecycle.settings = settings(
    max_examples=30, stateful_step_count=25, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
