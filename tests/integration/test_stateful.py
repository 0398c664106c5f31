"""Random interleavings of deliveries, duplicates, crashes, zombies, sweeps and clock jumps,
under injected DynamoDB faults: lost responses and throttles on any write, and errors past
the retries; with tenants' admissions, cancels, manual retries, long backoffs through the
ticker, and workflows. Manual retries and dead-letter redrives go through admission.

After every step: no job lost, none SUCCEEDED twice, every lease grant fenced by a newer epoch
than the last, attempts never above their limit, no tenant above its live-job cap, every
tenant's live count equal to its live jobs. At the end everything drains to a terminal state,
each job ran a bounded number of times, and every tenant's counters are exact.

Swarm testing: each example enables a random subset of the rule groups (:data:`GROUPS`: the
mixins' capabilities, and the fault weather), drawn in an ``@initialize``, so an example goes
deep on a few capabilities instead of shallow on all; the core rules are always on. And one
job with every option at once is there from the start (``stateful_seams.py``).

Each check counts how often it met the path it checks (``stateful_fired.py``): the counts are
reported at the end of the module, and ``make soak`` (``LEASEHOLD_REQUIRE_FIRED=1``) fails if a
check stayed at 0, i.e. passed idle. The mutant set (``tests/mutants``, ``make mutants``) puts
fixed bugs back and measures which the machine kills at this budget.

``make soak`` runs it with a larger budget (``LEASEHOLD_SOAK_EXAMPLES``).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import random
import uuid
from collections import Counter, defaultdict
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RULE_MARKER,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from moto import mock_aws

from leasehold.aws.clients import Clients
from leasehold.aws.dynamo import from_av
from leasehold.aws.faults import Fault, FaultInjector
from leasehold.aws.provision import create_all
from leasehold.aws.queues import Message, Received
from leasehold.clock import FakeClock
from leasehold.compose import compose
from leasehold.core.context import JobContext
from leasehold.core.jobs import Job
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import LeaseholdError, LeaseLost, RateLimited
from leasehold.lifecycle import control, deadletters, leasing, sweep_frontier, sweeper
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.store import Change
from leasehold.lifecycle.submission import COUNTED, DEADLINE, submit
from leasehold.lifecycle.worker import Delivery, Outcome, Worker
from leasehold.settings import Settings
from leasehold.tenancy.admission import Limits, retry_admitted, submit_admitted
from leasehold.tenancy.counters import slot_item
from leasehold.time import ticker
from leasehold.workflows import parse_workflow, start_workflow
from leasehold.workflows.progress import step_job_id
from tests import ddblocal
from tests.integration.stateful_admission import AdmissionContention
from tests.integration.stateful_api import ApiRules
from tests.integration.stateful_cells import join as join_cells
from tests.integration.stateful_deadlines import DeadlineRules
from tests.integration.stateful_durable import DurableRules
from tests.integration.stateful_durver import DurverRules
from tests.integration.stateful_effects import EffectsRules
from tests.integration.stateful_enqueue import EnqueueRules
from tests.integration.stateful_fired import FIRED, fire, idle, report
from tests.integration.stateful_flow import FlowRules
from tests.integration.stateful_flowkeys import FlowKeysRules
from tests.integration.stateful_leanadmit import LeanAdmissionRules
from tests.integration.stateful_paths import PathRules
from tests.integration.stateful_pausereset import PauseResetRules
from tests.integration.stateful_phantoms import MAX_CHILDREN, PhantomRules
from tests.integration.stateful_remote import EXTERNAL, RemoteRules
from tests.integration.stateful_reruns import ReRunRules
from tests.integration.stateful_retention import RetentionRules
from tests.integration.stateful_seams import BULK_TENANT, SeamsRules
from tests.integration.stateful_snapshot import Snapshots
from tests.integration.stateful_targets import TargetsRules
from tests.integration.stateful_versions import VersionRules

# The whole state machine is one pytest test: under a loaded CI machine it can pass the
# suite's per-test timeout, which would fail it for time alone.
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module", autouse=True)
def checks_that_fired(request: pytest.FixtureRequest) -> Any:
    """At the end of the module: how often each check met its path; with
    ``LEASEHOLD_REQUIRE_FIRED=1`` (``make soak``), a check that never did fails the run."""
    FIRED.clear()
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("\nstate machine checks, and how often each met its path:")
            reporter.write_line(report())
    if os.environ.get("LEASEHOLD_REQUIRE_FIRED") == "1" and idle():
        pytest.fail(f"checks that never met their path (they passed idle): {idle()}")

MAX_ATTEMPTS = 4
LEASE_S = 30.0
TENANTS = ("acme", "zeta")
LIMITS = Limits(rate=1000, burst=1000, max_live=4)
#: Every capped tenant whose counters are checked: the machine's, and the seams' bulk tenant.
CHECKED_TENANTS = (*TENANTS, BULK_TENANT)
WRITES = "|".join(f"dynamodb.{op}" for op in (
    "PutItem", "UpdateItem", "TransactWriteItems", "DeleteItem"))
#: What a caller sees when a write fails past botocore's retries (and what it does: retry).
FAILED = (ClientError, LeaseholdError, BatchProcessingError)


#: Swarm testing (issue 44): the rule groups an example may enable or not; a group is a
#: mixin's rules, or (``faults``) the machine's weather. The core rules are always on.
GROUPS: dict[str, tuple[type, ...]] = {
    "remote": (RemoteRules,), "pausereset": (PauseResetRules,), "seams": (SeamsRules,),
    "effects": (EffectsRules,), "admission": (AdmissionContention,),
    "flowkeys": (FlowKeysRules,), "flow": (FlowRules,), "durable": (DurableRules,),
    "enqueue": (EnqueueRules,), "leanadmit": (LeanAdmissionRules,),
    "targets": (TargetsRules,), "phantoms": (PhantomRules,), "api": (ApiRules,),
    "deadlines": (DeadlineRules,), "reruns": (ReRunRules,),
    "versions": (VersionRules,),
    "faults": (),
}
#: The machine's own rules in a group (the others are the core, always on).
OWN_GROUPS = {"weather": "faults", "next_write_fails_past_its_retries": "faults"}


class Lifecycle(TargetsRules, Snapshots, RemoteRules, PauseResetRules, SeamsRules, EffectsRules,
                AdmissionContention, FlowKeysRules, FlowRules, RetentionRules, DurableRules,
                DurverRules, EnqueueRules, LeanAdmissionRules, PhantomRules,
                ApiRules, DeadlineRules, ReRunRules, VersionRules,
                PathRules, RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # The bulk job and a durable parent's spawns admit under the runtime's limits (its
        # settings): the machine's, so that its counters are the ones checked.
        self.mock = mock_aws()
        self.mock.start()
        prefix = "s" + uuid.uuid4().hex[:8]
        settings_ = Settings(
            jobs_table=f"{prefix}-jobs", schedules_table=f"{prefix}-sch",
            tenants_table=f"{prefix}-ten", coordination_table=f"{prefix}-co",
            workflows_table=f"{prefix}-wf",
            queue_prefix=prefix, shards=2, lease_seconds=LEASE_S, handoff_seconds=120,
            skew_grace_seconds=2, max_crash_recoveries=3,
            pools=("default", *EXTERNAL), external_tasks=EXTERNAL,
            targets=self.targets_settings(),
            tenant_rate=LIMITS.rate, tenant_burst=LIMITS.burst,
            tenant_max_live=LIMITS.max_live or 0,
        )
        # Faults on every client (throttles retried at once: same path, no real backoff).
        self.injector = FaultInjector([], seed=0, throttle_delay=0)
        #: The requests (their bodies) a fault hit since the seams' checks last looked, not
        #: a throttle (botocore retries it): the jobs they name are the ones the faults
        #: touched, the only ones a violation is excused on (stateful_seams.py).
        self.fault_hits: list[str] = []
        hit = self.injector._hit

        def recorded_hit(kinds: tuple[str, ...], operation: str, body: Any) -> Any:
            fault = hit(kinds, operation, body)
            if fault is not None and fault.kind != "throttle":
                self.fault_hits.append(body.decode(errors="replace")
                                       if isinstance(body, bytes | bytearray) else str(body))
            return fault

        self.injector._hit = recorded_hit  # type: ignore[method-assign]
        clients = Clients(settings_, faults=self.injector)
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

        # Retries beyond the SQS delay limit: SCHEDULED, promoted by the ticker.
        registry.task("slow", retry=RetryPolicy(min_backoff_seconds=1000,
                                                 max_backoff_seconds=1100),
                      max_attempts=MAX_ATTEMPTS)(work)

        # One attempt: DEAD at its first failure, so retries and redrives meet full tenants.
        registry.task("once", max_attempts=1)(work)

        self.app = compose(settings_, clock=self.clock, registry=registry,
                                           clients=clients, rng=random.Random(0))
        self.phantoms_setup()
        self.api_setup()
        self.reruns_setup()
        self.versions_setup()
        self.succeeded: Counter[str] = Counter()
        self.grants: dict[str, list[int]] = defaultdict(list)
        #: Every job as the store last wrote it (observers see every change it makes).
        self.latest: dict[str, Job] = {}
        self.app.store.observers.append(self._observe)  # type: ignore[attr-defined]
        #: (job, epoch) whose latest hand-off SQS accepted. A failed send of one takes it
        #: out again: the sweeper re-sends with the epoch it had (a QUEUED row past its
        #: hand-off deadline), so a row whose first message was consumed (a park on a paused
        #: key) and whose re-send was then lost is the outbox again, its sweep entry its way
        #: to wake, not a message sent and consumed without moving the job on.
        self.sent: set[tuple[str, int]] = set()
        send = self.app.queues.send

        def recorded(pool: str, priority: str, message: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                out = send(pool, priority, message, *args, **kwargs)
            except BaseException:
                self.sent.discard((message.job_id, message.epoch))
                raise
            self.sent.add((message.job_id, message.epoch))
            return out

        self.app.queues.send = recorded  # type: ignore[method-assign]
        #: Rows a bulk delete removed, as last seen: no longer followed, still counted.
        self.deleted: dict[str, Job] = {}
        self.jobs: list[str] = []
        self.keys = itertools.count()  # idempotency keys: job ids the same on every replay
        self.manual_retries: Counter[str] = Counter()
        #: Every submission made, to replay with its key: (spec, admitted).
        self.submitted: list[tuple[JobSpec, bool]] = []
        self.seen_bodies: list[str] = []
        self.zombies: list[tuple[Job, str]] = []
        self.url = self.app.queues.url("default", "normal")
        #: Reads the raw rows (index attributes included) past the injected faults.
        self.inspect = Clients(settings_).dynamodb
        self.limits, self.failed = LIMITS, FAILED  # for the mixins
        #: The rule groups this example enables (all, until ``swarm`` draws its own).
        self.swarm: frozenset[str] = frozenset(GROUPS)
        #: Takeovers by the sweeper: each checked against the lease it ended, by our clock.
        self.takeovers = 0

    def _observe(self, job: Job, source: JobState | None) -> None:
        prior = self.latest.get(job.job_id)
        if prior is not None and source is JobState.RUNNING and job.state is not \
                JobState.RUNNING and prior.state is JobState.RUNNING and job.history and \
                job.history[-1].actor == sweeper.ACTOR:
            # No takeover before the lease expired, by the machine's clock: the sweeper
            # counts a lease as expired only past its end and the skew grace. (A heartbeat
            # the observers did not see only makes the lease we know end earlier.)
            self.takeovers += 1
            grace = int(self.app.settings.skew_grace_seconds * 1000)
            assert prior.lease_expires_at is not None and \
                self.app.now() - grace > prior.lease_expires_at, (
                    "taken over before its lease expired", self.app.now(), prior, job)
        self.latest[job.job_id] = job
        if source is not None and source.terminal and job.state.live:
            self.manual_retries[job.job_id] += 1  # a retry or a redrive, committed
        if job.state is JobState.SUCCEEDED and source is JobState.RUNNING:
            self.succeeded[job.job_id] += 1
        if job.state is JobState.RUNNING and source is JobState.QUEUED:
            self.grants[job.job_id].append(job.epoch)

    def teardown(self) -> None:
        try:
            self._drain()
        finally:
            self.phantoms_teardown()
            self.reruns_teardown()
            self.mock.stop()

    # -- rules --------------------------------------------------------------------------

    @initialize(fail_first=st.lists(st.integers(0, MAX_ATTEMPTS + 1), min_size=2, max_size=6),
                groups=st.sets(st.sampled_from(sorted(GROUPS)), min_size=1))
    def some_jobs(self, fail_first: list[int], groups: set[str]) -> None:
        """A few jobs; and swarm testing: this example's rule groups (the others' rules
        never run; their set-up and their checks still do). One initializer for both: each
        initializer takes one of the example's steps."""
        self.swarm = frozenset(groups)
        event(f"swarm of {len(groups)} groups")
        for failures in fail_first:
            self.submit_job(failures, lose_send=False)

    @initialize(dead=st.integers(1, 3))
    def a_tenant_at_its_cap_with_dead_jobs(self, dead: int) -> None:
        """acme has DEAD jobs and then as many live ones as its cap allows, so a retry or a
        redrive meets a full tenant from the first step."""
        for _ in range(dead):
            self.submit_job(1, lose_send=False, task="once", tenant=TENANTS[0])
        while batch := self.app.queues.receive(self.url, max_messages=10):
            consume(Worker(self.app), batch)
        for _ in range(LIMITS.max_live):
            self.submit_job(0, lose_send=False, tenant=TENANTS[0])
        # Issue 44's two defects, met in every example: a submission on a stale admission
        # item (refused once, written again under a new id), and a capped parent that
        # spawns more children than its tenant's cap has room for.
        self.submit_on_a_stale_admission_item(0)
        # The deadline chains (stateful_deadlines.py): held QUEUED, and re-queued, past
        # a deadline when the sweeper runs; each then re-run by hand.
        self.a_job_past_its_deadline_meets_the_sweeper(False)
        self.a_job_past_its_deadline_meets_the_sweeper(True)
        for _ in range(2):  # two parents, each spawning the one child of a unique key
            self.a_capped_parent_spawns_children(0, unique=True)
        self.a_capped_parent_spawns_children(MAX_CHILDREN)
        # And a traced batch through the front door (its rules: the swarm's "api").
        self.submit_through_the_front_door([0, 1], True, False)
        # The chains of the mutants that survived the machine (stateful_reruns.py): a
        # debounce window and a parent re-run by hand, a job created after a bulk request,
        # and a stream record the local relay cannot read.
        self.a_debounce_window_is_re_run_by_hand()
        self.a_parent_is_re_run_after_its_end_cancelled_a_child()
        self.a_job_is_created_after_a_bulk_request()
        self.the_relay_meets_a_record_it_cannot_read()
        # A durable job across a deploy (stateful_versions.py): ctx.patched, code versions.
        self.a_durable_job_outlives_a_deploy()
        # The paths the swarm rarely draws, once each (stateful_paths.py): a paused job, an
        # open debounce window, an expired job, a keyed job running, the lean tenant's.
        self.meet_the_rare_paths()

    @rule(fail_first=st.integers(0, MAX_ATTEMPTS + 1), lose_send=st.booleans(),
          task=st.sampled_from(["work", "work", "slow", "once"]),
          tenant=st.sampled_from((None, *TENANTS)))
    def submit_job(self, fail_first: int, lose_send: bool, task: str = "work",
                   tenant: str | None = None) -> None:
        """A library submission, or (with a tenant) an API one that takes a live slot. A
        caller whose submission failed retries it with its idempotency key."""
        spec = JobSpec(task=task, payload={"fail_first": fail_first},
                       idempotency_key=f"k{next(self.keys)}", tenant=tenant or "default")
        original = self.app.queues.send
        if lose_send:  # the row is written, the SQS send fails: the outbox case
            def broken(*args: Any, **kwargs: Any) -> None:
                raise ClientError({"Error": {"Code": "InternalError", "Message": "x"}}, "Send")

            self.app.queues.send = broken  # type: ignore[method-assign]
        try:
            for _ in range(3):
                try:
                    if tenant is None:
                        job = submit(self.app, spec).job
                    else:
                        job = submit_admitted(self.app, spec, "default", LIMITS).job
                    break
                except RateLimited:
                    return  # 429: over the tenant's cap, nothing written
                except FAILED:
                    event("a submission failed: the caller retries with its key")
            else:
                return
        finally:
            self.app.queues.send = original  # type: ignore[method-assign]
        if job.job_id not in self.jobs:
            self.jobs.append(job.job_id)
        self.submitted.append((spec, tenant is not None))

    @precondition(lambda self: self.submitted)
    @rule(data=st.data())
    def replay_a_submission(self, data: st.DataObject) -> None:
        """A client sends a submission again with its key: the job is found, nothing is
        written, and a job still QUEUED and never leased past the grace is handed off again
        (a duplicate message, fenced by the epoch)."""
        spec, admitted = data.draw(st.sampled_from(self.submitted))
        try:
            if admitted:
                replayed = submit_admitted(self.app, spec, "default", LIMITS)
            else:
                replayed = submit(self.app, spec)
        except FAILED:
            event("a replay failed")
            return
        assert not replayed.created
        event("a replay answered")

    @rule(data=st.data())
    def start_a_workflow(self, data: st.DataObject) -> None:
        """Two steps, b after a: b is WAITING until a succeeds (or is cancelled with it)."""
        fail_first = data.draw(st.integers(0, MAX_ATTEMPTS + 1))
        spec = parse_workflow({"idempotency_key": f"w{next(self.keys)}", "steps": [
            {"id": "a", "task": "work", "payload": {"fail_first": fail_first}},
            {"id": "b", "task": "work", "payload": {"fail_first": 0}, "depends_on": ["a"]},
        ]}, tenant="default")
        try:
            started = start_workflow(self.app, spec)
        except FAILED:
            return  # the repair pass finishes a half-started workflow, or nothing was written
        for step in ("a", "b"):
            job_id = step_job_id(started.workflow.workflow_id, step, "default")
            if job_id in self.latest and job_id not in self.jobs:
                self.jobs.append(job_id)

    @precondition(lambda self: self.jobs)
    @rule(data=st.data())
    def cancel_a_job(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(self.jobs))
        try:
            control.cancel(self.app, job_id)
        except FAILED:
            event("cancel refused or failed")

    @precondition(lambda self: any(j.state in (JobState.DEAD, JobState.CANCELLED)
                                   for j in self.latest.values()))
    @rule(data=st.data())
    def retry_a_finished_job(self, data: st.DataObject) -> None:
        """A manual retry, admitted like a submission (a token, and a slot under the cap)."""
        job_id = data.draw(st.sampled_from(sorted(
            j.job_id for j in self.latest.values()
            if j.state in (JobState.DEAD, JobState.CANCELLED))))
        try:
            retry_admitted(self.app, job_id, None, LIMITS)
        except RateLimited:
            event("a retry refused: over the cap")
        except FAILED:
            event("a retry failed")
        else:
            event("a retry admitted")

    @precondition(lambda self: any(j.state is JobState.DEAD for j in self.latest.values()))
    @rule(tenant=st.sampled_from(("default", *TENANTS)))
    def redrive_dead_letters(self, tenant: str) -> None:
        """A redrive of a tenant's DEAD jobs: what its admission lets through."""
        def retry(job_id: str) -> object:
            return retry_admitted(self.app, job_id, tenant, LIMITS,
                                  actor=deadletters.ACTOR, reason=deadletters.REASON)

        try:
            report = deadletters.redrive(self.app, tenant, pool="default", retry=retry)
        except FAILED:
            event("a redrive failed")  # what it moved is committed; the rest stays DEAD
            return
        event(f"a redrive moved {min(len(report.redriven), 2)}+ and left "
              f"{min(report.left_in_place, 1)}+ in place")

    @rule(lose=st.sampled_from([0.0, 0.0, 0.2, 0.5]), throttle=st.sampled_from([0.0, 0.2]))
    def weather(self, lose: float, throttle: float) -> None:
        """From now on, each DynamoDB write may land and lose its response (botocore retries
        it), or be throttled first."""
        self.injector.faults[:] = [
            Fault(target=WRITES, kind="lose", rate=lose, times=None),
            Fault(target=WRITES, kind="throttle", rate=throttle, times=None)]

    @rule()
    def next_write_fails_past_its_retries(self) -> None:
        self.injector.faults.append(Fault(target=WRITES, kind="fail", times=1))

    @rule()
    def tick(self) -> None:
        try:
            ticker.promote_due(self.app)
        except FAILED:
            event("tick failed")

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
        try:
            consume(Worker(self.app), healthy)
        except FAILED:
            event("a batch failed")  # Lambda retries it once its messages show again

    def _crash_after_lease(self, message: Received) -> tuple[Job, str] | None:
        """A worker leases the message's job as every worker does (waiting out a delay
        SQS rounded down, through the job's gate) and dies: its lease stays, its owner
        ``crashed:...`` (a zombie, if it comes back).

        moto's SQS delays run on the real clock, the machine's on its fake one: a delayed
        message may show before its job is due by the fake clock (a step takes real
        seconds). A worker never sees a message before its delay ends, so the clock is
        moved to the job's time first, as the delay would have (a healthy worker leases and
        finishes at once; a crashed one would otherwise hold a lease that ends before the
        row's sweep time, which no real worker could take)."""
        try:
            run_at = Message.parse(message.body).run_at
        except LeaseholdError:
            return None
        if run_at is not None and run_at > self.app.now():
            self.clock.advance((run_at - self.app.now()) / 1000)
        try:
            leased = leasing.lease(self.app, "crashed", Delivery(message.body))
        except FAILED:
            return None
        if isinstance(leased, Outcome):
            return None  # stale, or gated: nothing leased
        job, owner, _ = leased
        self.zombies.append((job, owner))
        return job, owner

    @rule()
    def a_zombie_wakes_beside_its_successor(self) -> None:
        """A worker leases a job and goes quiet past its lease; the sweeper takes the job
        over and another worker leases it, and is still running it when the first wakes up:
        the first's heartbeat and finish are refused, the successor's lease stands. (The
        chain the zombie rules need, in one step: at random it is rare.)"""
        batch = self.app.queues.receive(self.url, max_messages=10)
        self.seen_bodies += [m.body for m in batch]
        first = self._crash_after_lease(batch[0]) if batch else None
        try:
            consume(Worker(self.app), batch[1:])
        except FAILED:
            event("a batch failed")
        if first is None:
            return
        self.leases_expire_and_the_sweeper_runs()
        job_id = first[0].job_id
        batch = self.app.queues.receive(self.url, max_messages=10)
        self.seen_bodies += [m.body for m in batch]
        mine = [m for m in batch if json.loads(m.body)["job_id"] == job_id]
        successor = self._crash_after_lease(mine[0]) if mine else None
        try:
            consume(Worker(self.app), [m for m in batch if m not in mine])
        except FAILED:
            event("a batch failed")
        if successor is None:
            return
        event("a zombie woke beside its successor")
        self.zombies.remove(first)
        self._zombie_heartbeat(*first)
        self._zombie_finish(*first)

    @precondition(lambda self: self.seen_bodies)
    @rule(data=st.data())
    def duplicate_delivery(self, data: st.DataObject) -> None:
        body = data.draw(st.sampled_from(self.seen_bodies))
        try:
            Worker(self.app).process(Delivery(body))
        except FAILED:
            event("a duplicate delivery failed")

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
        self._zombie_finish(job, owner)

    def _zombie_finish(self, job: Job, owner: str) -> None:
        now = self.app.now()
        try:
            self.app.store.transition(
                job, Change(target=JobState.SUCCEEDED, actor="zombie", owner=owner,
                            unless_cancel_requested=True,
                            set={"result": '"zombie"', "finished_at": now}), now=now)
        except ClientError:
            return
        except LeaseholdError:
            event("zombie finish refused" if self.grants[job.job_id][-1] != job.epoch
                  else "late finish refused (job moved on)")
            fire("a zombie's finish lands only on its own lease")
            return
        event("late finish accepted")
        # Allowed only if its lease was never taken over: then it is simply late, not a zombie.
        assert self.grants[job.job_id][-1] == job.epoch
        fire("a zombie's finish lands only on its own lease")

    @precondition(lambda self: self.zombies)
    @rule(data=st.data(), superseded=st.booleans())
    def zombie_heartbeats(self, data: st.DataObject, superseded: bool) -> None:
        """A worker presumed dead tries to extend its lease."""
        pool = (superseded and self._superseded()) or self.zombies
        self._zombie_heartbeat(*data.draw(st.sampled_from(pool)))

    def _zombie_heartbeat(self, job: Job, owner: str) -> None:
        try:
            self.app.store.update_running(
                job, owner=owner, set={"lease_expires_at": self.app.now() + 30_000},
                conflict=LeaseLost)
        except (LeaseLost, ClientError):
            event("zombie heartbeat refused")
            fire("a zombie's heartbeat lands only on its own lease")
            return
        event("heartbeat accepted")
        assert self.grants[job.job_id][-1] == job.epoch  # only a lease never taken over
        fire("a zombie's heartbeat lands only on its own lease")

    @rule()
    def sweep(self) -> None:
        self._sweep()

    def _sweep(self) -> None:
        faults = sum(self.injector.injected.values())
        try:
            sweeper.sweep(self.app)
        except FAILED:
            event("a sweep failed")  # the next one picks up where it stopped
            return
        if sum(self.injector.injected.values()) == faults:
            self._no_queued_row_is_past_its_deadline_after_a_sweep()

    def _no_queued_row_is_past_its_deadline_after_a_sweep(self) -> None:
        """After a sweep no fault touched, no job that was QUEUED before the sweeper's
        cutoff is still QUEUED past its deadline (it ended DEAD, DeadlineExceeded)."""
        cutoff = self.app.now() - int(self.app.settings.skew_grace_seconds * 1000)
        checked = 0
        for raw in self.table_items(self.app.settings.jobs_table):
            item = from_av(raw)
            if item["state"] != JobState.QUEUED.value or item.get(DEADLINE) is None:
                continue
            checked += 1
            # When it entered QUEUED: a re-send (QUEUED to QUEUED) is no entry, or a
            # sweeper that re-sent a job past its deadline instead of ending it would pass.
            entered = max((int(h["at"]) for h in item.get("history") or ()
                           if h.get("to") == JobState.QUEUED.value
                           and h.get("from") != JobState.QUEUED.value), default=0)
            assert not (int(item[DEADLINE]) < cutoff and entered < cutoff), (
                "QUEUED past its deadline after a sweep", cutoff, item)
        fire("no QUEUED row past its deadline after a sweep", checked)

    @rule()
    def leases_expire_and_the_sweeper_runs(self) -> None:
        self.clock.advance(LEASE_S + self.app.settings.skew_grace_seconds + 1)
        self._sweep()

    @rule(seconds=st.sampled_from([1, 5, 20, 40, 130, 1100]))
    def advance_clock(self, seconds: int) -> None:
        self.clock.advance(seconds)

    # -- invariants ---------------------------------------------------------------------

    @invariant()
    def nothing_succeeds_twice_and_leases_are_fenced(self) -> None:
        assert all(count == 1 for count in self.succeeded.values()), self.succeeded
        fire("nothing succeeds twice", len(self.succeeded))
        for epochs in self.grants.values():
            assert epochs == sorted(set(epochs)), epochs  # each grant at a newer epoch
        fire("each lease fenced by a newer epoch",
             sum(1 for epochs in self.grants.values() if len(epochs) > 1))
        fire("no takeover before its lease expired", self.takeovers)
        self.takeovers = 0

    @invariant()
    def no_tenant_has_more_live_jobs_than_its_cap(self) -> None:
        for tenant in CHECKED_TENANTS:
            live = sum(1 for job in self.latest.values()
                       if job.tenant == tenant and job.extra.get(COUNTED) and job.state.live)
            assert live <= LIMITS.max_live, (tenant, live)
            fire("no tenant above its cap (a tenant at it)", live == LIMITS.max_live)

    @invariant()
    def every_tenant_counts_at_least_its_live_jobs(self) -> None:
        # Never fewer (issue 46): a slot is taken before its row and given back after its
        # end, so a crash or a lost write between them leaves one counted with no job, until
        # the repair (stateful_leanadmit.py checks it returns them; the drain, that none is
        # left).
        for tenant in CHECKED_TENANTS:
            live = sum(1 for job in self.latest.values()
                       if job.tenant == tenant and job.extra.get(COUNTED) and job.state.live)
            assert self._tenant(tenant).get("live", 0) >= live, (tenant, live)
            fire("every tenant counts its live jobs (a tenant with one)", live > 0)

    def _tenant(self, tenant: str) -> dict[str, int]:
        """The tenant's counters summed over its admission shards (LIMITS needs 4)."""
        totals: dict[str, int] = {}
        for shard in range(LIMITS.shard_count()):
            item = self.table_item(self.app.settings.tenants_table, "tenant",
                                   slot_item(tenant, shard))
            for k, v in item.items():
                if "N" in v and k not in ("tokens", "refilled_at"):
                    totals[k] = totals.get(k, 0) + int(float(v["N"]))
        return totals

    @invariant()
    def every_live_job_is_in_the_sweep_index_no_later_than_it_needs_the_sweeper(self) -> None:
        # The sweep index's bound (docs/design.md): a live row's sweep_at never passes its
        # deadline, nor (QUEUED) the expiry of a lease it could get now, and is never below
        # the sweeper's frontier (a pass will read it: a lost hand-off or a lost worker is
        # found). Other rows may keep the entry they had: the sweeper passes it, unwritten.
        # A row sent first (issue 46, lifecycle/handoff.py: a plain job's message goes out
        # before its row, which is put without an entry) has none by design: its message
        # of its epoch, in a queue (visible, delayed, or received and not yet deleted), is
        # its sweeper, QUEUED or RUNNING. Without an entry and without that message,
        # nothing would ever find it.
        settings = self.app.settings
        next_lease = self.app.now() + int(
            (settings.lease_seconds - settings.skew_grace_seconds) * 1000)
        frontier = sweep_frontier.load(self.app, self.inspect)
        messages: set[tuple[str, int]] | None = None
        for raw in self.table_items(settings.jobs_table):
            item = from_av(raw)
            if item["state"] in (JobState.QUEUED.value, JobState.RUNNING.value) and \
                    "sweep_shard" not in item:
                messages = self._messages() if messages is None else messages
                assert (item["job_id"], int(item["epoch"])) in messages, (
                    "a live row with neither a sweep entry nor its message", item)
                fire("a row sent first has its message in a queue (one without an entry)")
            elif item["state"] in (JobState.QUEUED.value, JobState.RUNNING.value):
                assert item["sweep_at"] <= item["lease_expires_at"], item
                assert item["sweep_at"] >= frontier.get(item["sweep_shard"], 0), item
                if item["state"] == JobState.QUEUED.value:
                    assert item["sweep_at"] <= next_lease, item
                fire("every live job in the sweep index, within its bound")

    @invariant()
    def no_job_is_lost_and_attempts_stay_in_bounds(self) -> None:
        assert set(self.latest) == set(self.jobs)
        for job in self.latest.values():
            self._check(job)
        fire("attempts stay in bounds (a job that ran)",
             sum(1 for job in self.latest.values() if job.attempt > 0))

    def _check(self, job: Job) -> None:
        assert job.attempt <= job.max_attempts
        # Each run is an attempt: a job runs at most its attempts, per manual retry.
        assert self.runs[job.job_id] <= job.max_attempts * (1 + self.manual_retries[job.job_id])
        if job.state in (JobState.QUEUED, JobState.RUNNING):
            # In the sweep index: the sweeper will find it if its message is lost.
            assert job.lease_expires_at is not None
        elif job.state in (JobState.SCHEDULED, JobState.SLEEPING):
            assert job.run_at > 0  # in the due index: the ticker will promote it
        else:
            assert job.state.terminal or job.state is JobState.WAITING, job.state

    def _sqs_timers_pass(self, seconds: float) -> None:
        """moto runs SQS's delays and visibility timeouts on the real clock, the machine on
        its fake one. In the drain the fake clock's jumps move those timers too, as real time
        moves SQS's: a message a worker received and died with shows again once the queue's
        visibility timeout (300 s) has passed, not after 300 real seconds, longer than a
        drain takes. A job sent first (no sweep entry, issue 46) whose worker died is found
        by its message and nothing else, as in production."""
        from moto.sqs.models import sqs_backends
        prefix, ms = self.app.settings.queue_prefix, seconds * 1000
        for regions in sqs_backends.values():
            for backend in regions.values():
                for name, queue in list(backend.queues.items()):
                    if name.startswith(prefix):
                        for message in list(queue._messages):
                            message.visible_at -= ms
                            message.delayed_until -= ms

    def _drain(self) -> None:
        self.injector.faults.clear()  # the weather clears; everything must settle
        for round_ in range(60):
            self.seams_before_drain(round_)
            # At least three rounds: the seams' drain re-runs, cancels and bulk actions
            # (their chains are what the checks at the drain's end look at).
            if round_ >= 3 and all(
                    job.state.terminal for job in self.app.store.batch_get(self.jobs)):
                break
            step = max(LEASE_S, self.app.settings.handoff_seconds) + 5
            self.clock.advance(step)
            self._sqs_timers_pass(step)
            ticker.promote_due(self.app)
            sweeper.sweep(self.app)
            while batch := self.app.queues.receive(self.url, max_messages=10):
                consume(Worker(self.app), batch)
            self.drain_round()
        jobs = self.app.store.batch_get(self.jobs)
        assert all(job.state.terminal for job in jobs), [(j.job_id, j.state) for j in jobs]
        # What the observers saw is what the table holds, or an earlier state of the same
        # job: a process killed while botocore retried a write that had landed never told its
        # observers (as a real process's observers die with it). Never a state that was not.
        for job in jobs:
            seen = self.latest[job.job_id]
            if (seen.state, seen.epoch) != (job.state, job.epoch):
                assert not seen.state.terminal and seen.epoch <= job.epoch, (seen, job)
        for job in jobs:
            self._check(job)
            if job.state is JobState.SUCCEEDED:
                # Seen once by the observers, or not at all when (as above) the process that
                # committed it died before telling them; never twice.
                told = self.latest[job.job_id].state is JobState.SUCCEEDED
                assert self.succeeded[job.job_id] == (1 if told else 0), (
                    self.succeeded[job.job_id], self.latest[job.job_id])
            assert job.attempt <= job.max_attempts
        self.nothing_succeeds_twice_and_leases_are_fenced()
        for tenant in CHECKED_TENANTS:  # no slot leaked, every outcome counted once
            counted = [j for j in (*jobs, *self.deleted.values())
                       if j.tenant == tenant and j.extra.get(COUNTED)]
            counters = self._tenant(tenant)
            assert counters.get("live", 0) == 0
            for state in (JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED):
                # Never counted twice; a give-back that never landed (its slot returned by
                # the repair) did not count its outcome (a /stats figure).
                assert counters.get(f"count_{state.value}", 0) <= \
                    sum(1 for j in counted if j.state is state), (tenant, state, counters)
        self.flow_drained()


def _enabled(group: str) -> Any:
    def enabled(self: Any) -> bool:
        return group in self.swarm
    enabled.__name__ = f"swarm_enables_{group}"
    return enabled


def _join_the_swarm() -> None:
    """Give every rule of a group the precondition that its example enabled the group
    (hypothesis reads a rule's preconditions when it first collects the machine's rules)."""
    owners = [(group, cls, None) for group, classes in GROUPS.items() for cls in classes]
    owners += [(group, Lifecycle, name) for name, group in OWN_GROUPS.items()]
    for group, cls, only in owners:
        for name, function in list(vars(cls).items()):
            rule_ = getattr(function, RULE_MARKER, None)
            if rule_ is None or (only is not None and name != only):
                continue
            setattr(function, RULE_MARKER, dataclasses.replace(
                rule_, preconditions=(*rule_.preconditions, _enabled(group))))


join_cells(Lifecycle, GROUPS)  # issue 48's cell rules: their own group (stateful_cells.py)
_join_the_swarm()
TestLifecycle = Lifecycle.TestCase
# Every feature's rules run in this one machine (admission, flow keys, concurrency slots,
# retention, durable steps), so an example costs ~25 s: `make test` runs a few on each
# substrate, `make soak` (200 x 40 steps) is where the machine searches hard.
#: ``LEASEHOLD_MACHINE_SHRINK=0`` (``make mutants``): stop at the first failing example, no
#: shrinking; what counts there is whether, and how soon, the machine fails.
PHASES = tuple(p for p in Phase if os.environ.get("LEASEHOLD_MACHINE_SHRINK", "1") == "1"
               or p is not Phase.shrink)
#: ``make test`` runs the same examples every time (a derandomized search: a red CI names a
#: bug, not a draw); ``make soak`` (``LEASEHOLD_SOAK_EXAMPLES``) searches at random, and
#: ``make mutants`` (``LEASEHOLD_MACHINE_SHRINK=0``) at the seed it passes.
DERANDOMIZE = not ({"LEASEHOLD_SOAK_EXAMPLES", "LEASEHOLD_MACHINE_SHRINK"} & set(os.environ))
TestLifecycle.settings = settings(
    max_examples=int(os.environ.get("LEASEHOLD_SOAK_EXAMPLES", "5")),
    stateful_step_count=int(os.environ.get("LEASEHOLD_SOAK_STEPS", "25")), deadline=None,
    suppress_health_check=[HealthCheck.too_slow], phases=PHASES, derandomize=DERANDOMIZE,
)


class LifecycleOnDynamoDBLocal(Lifecycle):
    """The same machine with DynamoDB on AWS's DynamoDB Local, SQS still moto (issue 19).

    Its lost responses meet AWS's ClientRequestToken semantics (botocore's retry of a
    transaction that landed succeeds instead of failing its condition), and its writes meet
    AWS's validation. A smaller budget: the moto machine above explores the interleavings.
    """

    def __init__(self) -> None:
        self.env = pytest.MonkeyPatch()  # a unittest class: no fixture reaches __init__
        self.env.setenv("AWS_ENDPOINT_URL_DYNAMODB", ddblocal.shared().endpoint)
        try:
            super().__init__()
        except BaseException:
            self.env.undo()
            raise

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            self.env.undo()


TestLifecycleOnDynamoDBLocal = LifecycleOnDynamoDBLocal.TestCase
TestLifecycleOnDynamoDBLocal.settings = settings(
    max_examples=int(os.environ.get("LEASEHOLD_SOAK_EXAMPLES_DDBLOCAL", "2")),
    stateful_step_count=int(os.environ.get("LEASEHOLD_SOAK_STEPS", "25")), deadline=None,
    suppress_health_check=[HealthCheck.too_slow], phases=PHASES, derandomize=DERANDOMIZE,
)
