"""The state machine's rules where capabilities meet (issue 29, "Seams").

Mixed into ``tests/integration/test_stateful.py``'s machine, so every rule here meets the
others (lost responses, throttles, errors past the retries, crashes at any write, zombies,
duplicates, sweeps, clock jumps). One durable task, ``seam``, combines in ONE job what
the other mixins prove one at a time: a concurrency key (limit 1, pausable) and sometimes a
throttle, a ``deadline_seconds``, an effect through ``ctx.transact`` inside a ``ctx.step`` and
another outside it, then short or long sleeps, a callback that may time out, and children
(one of a task with a ``unique`` default) that it waits for; sometimes an effect whose own
condition fails. Its jobs are admitted against a capped tenant, cancelled (parents),
retried by hand and in bulk (``POST /jobs/bulk``: retry, cancel, delete; mostly on a tenant of
their own, :data:`BULK_TENANT`, whose cap has room for the bulk job), and workflows whose
first step always fails are bulk-deleted and retried (``POST /workflows/{id}/retry``). Every
example starts with one seam job with every option at once, and the drain finishes the chains
the checks need (:meth:`SeamsRules.seams_before_drain`).

After every step:

* every held lease and slot has a live holder (a RUNNING row's owner is a worker still
  running, or one the machine killed; a slot holds only RUNNING jobs at their epoch);
* each SUCCEEDED job's effects are applied exactly once (inside the step and outside it);
* every non-terminal job has a way to wake: a hand-off message at its epoch in a queue, a
  due-index entry, or a parked entry (or it is the outbox case: its message was never sent,
  and the sweeper's hand-off deadline finds it);
* no live child has a parent that ended without succeeding (the cancel policy), and a
  child of a counted parent is counted against the tenant's cap; at most one live job per
  unique key, children included;
* event ids (``streams.relay.event_id``) are unique per committed change;
* no row that a workflow or a waiting parent references is deleted;
* a bulk action acts only on jobs created up to its request;
* an attempt never runs past its job's deadline, and a job retried after its callback timed
  out waits again (a fresh timeout).

A check whose defect's fix has not landed is listed in :data:`AWAITING` (with the defect's
number in issue 29); ``LEASEHOLD_SEAMS_CHECK=all`` turns every check on, and
``LEASEHOLD_SEAMS_ONLY=N`` runs defect N's alone, to see each catch its defect on old code.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections import Counter, defaultdict
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from leasehold.aws.dynamo import from_av
from leasehold.aws.queues import Message
from leasehold.bulk import run as bulk
from leasehold.bulk.actions import ACTOR as BULK
from leasehold.core.context import JobContext
from leasehold.core.holds import held
from leasehold.core.jobs import Job
from leasehold.core.policy import RetryPolicy
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.durable import callbacks
from leasehold.durable.children import PARENT
from leasehold.errors import LeaseholdError, RateLimited
from leasehold.flow import key_usage, slots
from leasehold.lifecycle import control, sweep_frontier
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.submission import COUNTED, DEADLINE
from leasehold.lifecycle.worker import Worker
from leasehold.streams.relay import event_id
from leasehold.tenancy.admission import retry_admitted, submit_admitted
from leasehold.workflows import parse_workflow, start_workflow
from leasehold.workflows.progress import step_job_id
from tests.integration.api_client import ApiClient
from tests.integration.liveness import wake_paths
from tests.integration.stateful_effects import ZOMBIE
from tests.integration.stateful_fired import fire

#: Defects of issue 29 whose fix has not landed on this branch: the check that catches each
#: stays off until it does. ``LEASEHOLD_SEAMS_CHECK=all`` (or ``=1,5``) turns them on, to see
#: each catch its defect on the old code.
AWAITING: dict[int, str] = {}

SEAM = "seam"
CHILD = "seam.child"
#: A child task with a ``unique`` default: children go through the submission intakes.
UNIQUE_CHILD = "seam.unique_child"
SEAMS = "-seams"
TENANT = "zeta"  # admitted against the machine's cap (LIMITS); acme starts full
#: The tenant bulk actions act on (its own seam jobs): seam jobs fill the seam tenant's cap,
#: and a bulk job is admitted under its tenant's cap like any job, so there it met 429.
BULK_TENANT = "omega"
KEY = "s0"  # the seam jobs' concurrency key (limit 1), pausable
THROTTLE = {"key": "t0", "limit": 2, "period_seconds": 10}
LABEL = ("seam", "1")
CALLBACK_S = 60
DEADLINE_S = 100
WAITS = ("sleep", "long_sleep", "callback", "children")


def checking(defect: int) -> bool:
    """Whether the check that catches ``defect`` runs: its fix has landed (or it is asked
    for), and no other check was singled out (``LEASEHOLD_SEAMS_ONLY=5`` runs defect 5's
    alone, to see it catch its defect on the old code without another catching first)."""
    only = os.environ.get("LEASEHOLD_SEAMS_ONLY")
    if only:
        return str(defect) in only.split(",")
    asked = os.environ.get("LEASEHOLD_SEAMS_CHECK", "")
    return defect not in AWAITING or asked == "all" or str(defect) in asked.split(",")


class SeamsRules:
    """Mixed into the lifecycle machine; uses its ``app``, ``inspect``, ``injector``,
    ``fault_hits``, ``jobs``, ``latest``, ``runs``, ``limits``, ``failed``, ``sent`` and
    ``deleted``."""

    app: Any
    inspect: Any
    injector: Any
    fault_hits: list[str]
    jobs: list[str]
    latest: dict[str, Job]
    runs: Counter[str]
    limits: Any
    failed: tuple[type[BaseException], ...]
    sent: set[tuple[str, int]]
    deleted: dict[str, Job]
    step_runs: Any  # stateful_durable.py's record of each step's runs

    seams = ""

    @initialize(jobs=st.lists(st.tuples(
        st.lists(st.sampled_from(WAITS), max_size=2, unique=True), st.integers(0, 1),
        st.booleans(), st.booleans(), st.booleans(), st.booleans()), min_size=2, max_size=4),
        paused=st.booleans())
    def seam_tasks(self, jobs: list[tuple[Any, ...]], paused: bool) -> None:
        """The seam tasks, and from the start a few seam jobs and a seam workflow (the
        machine's rules are many: without them most runs would meet few seams)."""
        self._seam_setup()
        self._a_job_with_every_option_at_once()
        for job in jobs:
            self.submit_a_seam_job(*job)
        self.start_a_seam_workflow()
        if checking(13):
            self.submit_an_internal_task()
        if paused:
            key_usage.pause(self.app, TENANT, KEY)

    def _a_job_with_every_option_at_once(self) -> None:
        """One seam job with every option at once, from the start of every example: its key
        and throttle, a deadline, an effect inside a step and one outside it, a short sleep,
        a callback with a timeout, and children (one of a task with a unique default); and
        one on the bulk tenant that waits for a callback (a bulk retry re-runs it)."""
        # Children before the callback: a callback that times out ends the attempt.
        self.submit_a_seam_job(["sleep", "children", "callback"], 0, True, True, False, True)
        self.submit_a_seam_job(["callback"], 0, False, False, False, False, BULK_TENANT)

    def _seam_setup(self) -> None:
        self.seams = self.app.settings.jobs_table + SEAMS
        self.inspect.create_table(
            TableName=self.seams, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
        self.api = ApiClient(self.app, self._api_config())
        self.seam_keys = itertools.count()
        self.seam_tokens: dict[str, str] = {}
        self.seam_workflows: list[str] = []
        #: (job, its attempt's deadline, its job's deadline) for each attempt told it could
        #: run past its job's deadline (defect 7).
        self.overruns: list[tuple[str, int, int]] = []
        self.deadline_attempts = 0
        #: Jobs whose last end was their callback's timeout, and when each such job was
        #: last re-run from there (a manual or bulk retry).
        self.timed_out: set[str] = set()
        self.retried_at: dict[str, int] = {}
        #: Event ids of the committed changes, and how many changes had each.
        self.event_ids: Counter[str] = Counter()
        #: The bulk request outstanding: (bulk job id, tenant, requested at).
        self.bulk_request: tuple[str, str, int] | None = None
        #: Jobs a bulk action changed, with the time of the request that changed them.
        self.bulk_touched: dict[str, tuple[int, int]] = {}
        #: Internal tasks a submission was allowed to create (defect 13).
        self.internal_accepted: list[str] = []
        #: Violations seen at the end of a step in which a fault fired, with the row's change
        #: count then: the process that would have repaired them died (its lease runs out,
        #: the sweeper or the drain ends it). The excuse holds for that job only, and only
        #: until its row changes again (its repair): a violation after that counts.
        self.excused: dict[tuple[str, ...], Any] = {}
        #: Seam jobs the drain re-ran after their callback timed out (once each).
        self.drain_retried: set[str] = set()
        self._seam_tasks()
        self.app.store.observers.append(self._seam_observe)

    def _api_config(self) -> Any:
        from leasehold.api.context import ApiConfig
        return ApiConfig(trust_tenant_header=True, limits=self.limits)

    def _seam_tasks(self) -> None:
        registry, table = self.app.registry, self.seams

        def charge(ctx: JobContext, what: str) -> str:
            if what == "step":  # run as a step: what stateful_durable.py checks its store by
                self.step_runs[(ctx.job_id, "charge")].append(what)
            # An item per effect: one transaction never holds two operations on one item.
            ctx.transact([{"Update": {
                "TableName": table, "Key": {"pk": {"S": f"{ctx.job_id}#{what}"}},
                "UpdateExpression": "ADD n :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}}}}])
            return what

        @registry.task(SEAM, max_attempts=3, retry=RetryPolicy(min_backoff_seconds=0,
                                                                max_backoff_seconds=0.3))
        def seam(payload: Any, ctx: JobContext) -> Any:
            # Not in the machine's runs: a durable job runs its handler again after each
            # wake-up, and a sleep is no attempt.
            deadline = ctx.extra.get(DEADLINE)
            if deadline is not None:
                self.deadline_attempts += 1
            if deadline is not None and ctx.deadline_ms > int(deadline):
                self.overruns.append((ctx.job_id, ctx.deadline_ms, int(deadline)))
            ctx.step("charge", charge, ctx, "step")  # an effect inside a step
            for wait in payload["waits"]:
                if wait == "sleep":
                    ctx.sleep(0.5)
                elif wait == "long_sleep":
                    ctx.sleep(1000)
                elif wait == "callback":
                    callback = ctx.callback("cb", timeout_seconds=CALLBACK_S)
                    self.seam_tokens[ctx.job_id] = callback.token
                    callback.wait()  # CallbackTimeout fails the attempt
                elif wait == "children":
                    ctx.wait_for([ctx.spawn(UNIQUE_CHILD, {"n": 0}, name="c0"),
                                  ctx.spawn(CHILD, {"n": 1}, name="c1")])
            charge(ctx, "finish")  # an effect outside a step: with the finish
            if payload.get("bad_effect") and ctx.attempt == payload["fail_first"] + 1:
                ctx.transact([{"ConditionCheck": {  # the application's own condition fails
                    "TableName": table, "Key": {"pk": {"S": "no such row"}},
                    "ConditionExpression": "attribute_exists(pk)"}}])
            if ctx.attempt <= payload["fail_first"]:
                raise RuntimeError(f"planned failure {ctx.attempt}")
            return "done"

        def child(payload: Any, ctx: JobContext) -> Any:
            self.runs[ctx.job_id] += 1
            return payload["n"]

        registry.task(CHILD, max_attempts=2)(child)
        registry.task(UNIQUE_CHILD, max_attempts=2, unique={"key": "child{payload.n}"})(child)

    def _seam_observe(self, job: Job, source: JobState | None) -> None:
        if job.job_id not in self.jobs and (
                job.extra.get(PARENT) or job.task == bulk.TASK
                or job.labels.get(LABEL[0]) == LABEL[1]):
            self.jobs.append(job.job_id)  # children, bulk jobs, what a failed call made
        if source is None or source is not job.state:
            self.event_ids[event_id(job)] += 1
        if job.state.terminal:
            timed_out = job.error is not None and job.error.type == "CallbackTimeout"
            (self.timed_out.add if timed_out else self.timed_out.discard)(job.job_id)
        elif source is not None and source.terminal and job.job_id in self.timed_out:
            self.retried_at[job.job_id] = self.app.now()
        last = job.history[-1] if job.history else None
        if self.bulk_request is not None and last is not None and last.actor == BULK \
                and job.task != bulk.TASK:
            self.bulk_touched[job.job_id] = (job.created_at, self.bulk_request[2])

    # -- rules ------------------------------------------------------------------------

    @precondition(lambda self: self.seams)
    @rule(waits=st.lists(st.sampled_from(WAITS), max_size=2, unique=True),
          fail_first=st.integers(0, 1), keyed=st.booleans(), throttled=st.booleans(),
          bad_effect=st.booleans(), deadline=st.booleans(),
          tenant=st.sampled_from([TENANT, TENANT, BULK_TENANT]))
    def submit_a_seam_job(self, waits: list[str], fail_first: int, keyed: bool,
                          throttled: bool, bad_effect: bool, deadline: bool,
                          tenant: str = TENANT) -> None:
        """A durable job that takes a key's slot, charges inside a step, sleeps or waits,
        and charges again with its finish; admitted against the tenant's cap."""
        spec = JobSpec(task=SEAM, tenant=tenant, labels=dict([LABEL]),
                       payload={"waits": waits, "fail_first": fail_first,
                                "bad_effect": bad_effect and checking(3)},
                       idempotency_key=f"seam{next(self.seam_keys)}",
                       concurrency={"key": KEY, "limit": 1} if keyed else None,
                       throttle=THROTTLE if throttled else None,
                       deadline_seconds=DEADLINE_S if deadline else None)
        for _ in range(3):
            try:
                job = submit_admitted(self.app, spec, "default", self.limits).job
            except RateLimited:
                event("a seam job refused: the tenant is at its cap")
                return
            except self.failed:
                continue  # the caller retries with its key
            if job.job_id not in self.jobs:
                self.jobs.append(job.job_id)
            return

    @precondition(lambda self: self.seams)
    @rule(data=st.data())
    def cancel_a_seam_parent(self, data: st.DataObject) -> None:
        parents = sorted(j.job_id for j in self.latest.values()
                         if j.task == SEAM and j.state.live)
        if not parents:
            return
        try:
            control.cancel(self.app, data.draw(st.sampled_from(parents)))
        except (*self.failed, LeaseholdError):
            event("a parent's cancel refused or failed")

    @precondition(lambda self: getattr(self, "seam_tokens", None))
    @rule(data=st.data())
    def complete_a_seam_callback(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.seam_tokens)))
        try:
            callbacks.complete(self.app, self.seam_tokens[job_id], TENANT, value="v")
        except Exception as exc:
            event(f"a seam completion refused: {type(exc).__name__}")

    @precondition(lambda self: self.seams)
    @rule(data=st.data())
    def retry_a_finished_seam_job(self, data: st.DataObject) -> None:
        """A manual retry (API, CLI, console): a job that timed out waiting for its callback,
        if there is one."""
        done = sorted((j.error is None or j.error.type != "CallbackTimeout", j.job_id)
                      for j in self.latest.values()
                      if j.task == SEAM and j.state in (JobState.DEAD, JobState.CANCELLED))
        if not done:
            return
        job_id = data.draw(st.sampled_from([i for _, i in done[:2]]))
        try:
            retry_admitted(self.app, job_id, TENANT, self.limits)
        except (*self.failed, LeaseholdError):
            event("a seam retry refused or failed")

    @precondition(lambda self: self.seams)
    @rule(paused=st.booleans())
    def pause_or_resume_the_seam_key(self, paused: bool) -> None:
        try:
            (key_usage.pause if paused else key_usage.resume)(self.app, TENANT, KEY)
        except self.failed:
            event("a pause or resume failed")

    @precondition(lambda self: self.seams)
    @rule()
    def start_a_seam_workflow(self) -> None:
        """Its first step always fails: the workflow ends FAILED with a DEAD step and a
        cancelled dependent, what a bulk delete and a workflow retry then meet."""
        spec = parse_workflow({"idempotency_key": f"sw{next(self.seam_keys)}", "steps": [
            {"id": "a", "task": "work", "payload": {"fail_first": 9},
             "labels": dict([LABEL])},
            {"id": "b", "task": "work", "payload": {"fail_first": 0}, "depends_on": ["a"],
             "labels": dict([LABEL])},
        ]}, tenant="default")
        try:
            started = start_workflow(self.app, spec)
        except self.failed:
            return
        workflow_id = started.workflow.workflow_id
        self.seam_workflows.append(workflow_id)
        for step in ("a", "b"):
            job_id = step_job_id(workflow_id, step, "default")
            if job_id in self.latest and job_id not in self.jobs:
                self.jobs.append(job_id)

    @precondition(lambda self: getattr(self, "seam_workflows", None))
    @rule(data=st.data())
    def retry_a_seam_workflow(self, data: st.DataObject) -> None:
        workflow_id = data.draw(st.sampled_from(self.seam_workflows))
        reply = self.api.post(f"/workflows/{workflow_id}/retry", tenant="default")
        event(f"a workflow retry answered {reply.status}")

    def _bulk_live(self) -> bool:
        if self.bulk_request is None:
            return False
        job = self.latest.get(self.bulk_request[0])
        return job is None or job.state.live

    @precondition(lambda self: self.seams)
    @rule(action=st.sampled_from(["retry", "cancel", "delete", "delete steps"]),
          tenant=st.sampled_from([BULK_TENANT, BULK_TENANT, TENANT]))
    def a_bulk_action(self, action: str, tenant: str = BULK_TENANT) -> None:
        """``POST /jobs/bulk`` on the seam jobs (or the seam workflows' steps), after its dry
        run; one at a time, so what a bulk job changes is its request's. Mostly on the bulk
        tenant's, whose cap has room for the bulk job."""
        self._bulk(action, tenant)

    def _bulk(self, action: str, tenant: str) -> int:
        """The bulk action's request, and its answer's status (0: one is still running)."""
        if self._bulk_live():
            return 0
        tenant = "default" if action == "delete steps" else tenant
        body: dict[str, Any] = {"action": action.split()[0],
                                "filter": {"label": [":".join(LABEL)]}}
        if body["action"] == "delete":  # the finished jobs whose effects no one counts
            body["filter"]["state"] = ["DEAD", "CANCELLED"]
        preview = self.api.post("/jobs/bulk", {**body, "dry_run": True}, tenant=tenant)
        requested_at = self.app.now()
        reply = self.api.post("/jobs/bulk", body, tenant=tenant)
        event(f"a bulk {action}: dry run {preview.status}, request {reply.status}")
        if reply.status == 202:
            bulk_id = reply.body["bulk_id"]
            self.bulk_request = (bulk_id, tenant, requested_at)
            if bulk_id not in self.jobs:
                self.jobs.append(bulk_id)
        return int(reply.status)

    @precondition(lambda self: self.seams and checking(13))
    @rule()
    def submit_an_internal_task(self) -> None:
        """Internal tasks are not for submission: ``POST /jobs`` refuses them."""
        reply = self.api.post("/jobs", {"task": bulk.TASK, "payload": {"x": 1}}, tenant=TENANT)
        if reply.status < 300:
            self.internal_accepted.append(reply.body["job_id"])

    # -- invariants ---------------------------------------------------------------------

    def _rows(self) -> dict[str, dict[str, Any]]:
        return {raw["job_id"]["S"]: from_av(raw)
                for raw in self.table_items(self.app.settings.jobs_table)}

    def _messages(self) -> set[tuple[str, int]]:
        """Every hand-off message in the machine's queues (visible, delayed or in flight),
        read from moto's SQS backend: receiving would change what it checks."""
        from moto.sqs.models import sqs_backends
        prefix, found = self.app.settings.queue_prefix, set()
        for _, regions in sqs_backends.items():
            for _, backend in regions.items():
                for name, queue in list(backend.queues.items()):
                    if not name.startswith(prefix):
                        continue
                    for message in list(queue._messages):
                        try:
                            parsed = Message.parse(message.body)
                        except LeaseholdError:
                            continue
                        found.add((parsed.job_id, parsed.epoch))
        return found

    def _faulted(self) -> list[str]:
        """The requests a fault (not a throttle, which botocore retries) hit since the last
        check: the process that made each died or gave up mid-way, and what it would have
        done next for the jobs it names is left to a lease's expiry, the sweeper or the
        drain."""
        hits, self.fault_hits = self.fault_hits, []
        return hits

    def _violations(self, kind: str, found: list[tuple[str, ...]], faulted: list[str],
                    rows: dict[str, dict[str, Any]]) -> list[tuple[str, ...]]:
        """The violations of one check (each ``(kind, job_id, ...)``) not excused: one is
        excused when it appeared in a step a fault fired in, on a job a request the fault
        hit named (the job, or for a child its parent, whose end it follows), and only
        while that job's row has not changed since (its next change is its repair). Each
        check forgets only its own kind's excuses: the checks share :attr:`excused`, and
        one check's violations are never in another's ``found`` (a stranded job's excuse,
        dropped by the next check of the same step as "repaired", counted again one step
        later with its row untouched)."""
        assert all(violation[0] == kind for violation in found), (kind, found)
        def version(violation: tuple[str, ...]) -> Any:
            row = rows.get(violation[1]) or {}
            return (row.get("changes"), row.get("state"), row.get("epoch"))

        def touched(violation: tuple[str, ...]) -> bool:
            row = rows.get(violation[1]) or {}
            named = [violation[1], *([str(row[PARENT])] if row.get(PARENT) else [])]
            return any(job_id in hit for hit in faulted for job_id in named)

        for violation in found:
            if touched(violation):
                self.excused.setdefault(violation, version(violation))
        for violation in [v for v in self.excused if v[0] == kind and v not in found]:
            del self.excused[violation]  # repaired: a later one counts again
        excused = [v for v in found if self.excused.get(v) == version(v)]
        if excused:
            event("a fault excused a violation (of the job it touched, until its repair)")
        return [v for v in found if v not in excused]

    @invariant()
    def seams_hold(self) -> None:
        if self.seams:
            self._seams_hold(self._faulted())

    def drain_round(self) -> None:
        """After each round of the machine's drain (no faults any more): the same checks,
        while jobs still wake, wait and run."""
        if self.seams:
            self._seams_hold(self._faulted())

    def flow_drained(self) -> None:
        """The machine's drain ends here (every job terminal, the weather clear): the same
        checks once more, over every job's end."""
        super().flow_drained()  # type: ignore[misc]
        if self.seams:
            self._seams_hold(False)

    def _seams_hold(self, faulted: list[str]) -> None:
        rows = self._rows()
        self._forget_deleted(rows)
        self._no_referenced_row_is_deleted(rows)
        self._every_lease_and_slot_has_a_live_holder(rows, faulted)
        self._every_non_terminal_job_has_a_way_to_wake(rows, faulted)
        self._effects_applied_exactly_once(rows)
        self._children_follow_their_parents(rows, faulted)
        self._event_ids_are_unique()
        self._bulk_acts_within_its_request()
        self._attempts_stop_at_the_deadline_and_retries_rearm_callbacks()
        assert not self.internal_accepted, self.internal_accepted

    def _forget_deleted(self, rows: dict[str, dict[str, Any]]) -> None:
        """A bulk delete removed these rows: the machine no longer follows them (the drain
        still counts their outcomes against their tenants)."""
        for job_id in [i for i in self.jobs if i not in rows]:
            self.jobs.remove(job_id)
            job = self.latest.pop(job_id, None)
            if job is None:
                continue
            self.deleted[job_id] = job
            if self.bulk_request is not None:
                self.bulk_touched[job_id] = (job.created_at, self.bulk_request[2])

    def _no_referenced_row_is_deleted(self, rows: dict[str, dict[str, Any]]) -> None:
        # Defect 10: a workflow's steps, and a live parent's children, are never deleted.
        if not checking(10):
            return
        for workflow_id in self.seam_workflows:
            for step in ("a", "b"):
                step_id = step_job_id(workflow_id, step, "default")
                assert step_id not in self.deleted, (workflow_id, step)
        for job_id, job in self.deleted.items():
            parent = rows.get(str(job.extra.get(PARENT)))
            assert parent is None or not JobState(parent["state"]).live, (job_id, parent)
        fire("no referenced row deleted (a bulk delete that ran)",
             sum(1 for job_id in self.bulk_touched if job_id in self.deleted)
             + sum(1 for job in self.latest.values() if job.task == bulk.TASK
                   and job.state is JobState.SUCCEEDED and '"delete"' in job.payload_json))

    def _every_lease_and_slot_has_a_live_holder(self, rows: dict[str, dict[str, Any]],
                                                faulted: list[str]) -> None:
        # Defect 3: a RUNNING job whose worker is gone (not one the machine killed, nor its
        # remote worker's, stateful_remote.py) is stranded for its whole lease.
        orphans = [("lease", job_id, row["lease_owner"]) for job_id, row in rows.items()
                   if row["state"] == JobState.RUNNING.value
                   and not str(row.get("lease_owner", "")).startswith("crashed:")
                   and row.get("lease_owner") not in getattr(self, "remote_owners", ())]
        if checking(3):
            assert not self._violations("lease", orphans, faulted, rows), orphans
        fire("every lease has a live holder (a RUNNING job)",
             sum(1 for row in rows.values() if row["state"] == JobState.RUNNING.value))
        # Every key's slot (the seam key, the flow mixins', a target host's) holds only
        # RUNNING jobs at their epoch.
        running = {slots.member(job_id, int(row["epoch"])) for job_id, row in rows.items()
                   if row["state"] == JobState.RUNNING.value}
        for raw in self.table_items(self.app.settings.tenants_table):
            item = from_av(raw)
            if "#flow#" not in str(item.get("tenant")):
                continue
            held = slots.holders(item)
            assert held <= running, (item["tenant"], held, running)
            fire("every slot of every key has a live holder (a held slot)", len(held))

    def _every_non_terminal_job_has_a_way_to_wake(self, rows: dict[str, dict[str, Any]],
                                                  faulted: list[str]) -> None:
        # Defect 1: a sleeper whose lease its key refused kept only the sweeper's hand-off
        # deadline. The sweep index is a job's way to wake only when its message was never
        # sent (the outbox case, a process that died before its send): a message sent and
        # consumed without moving the job on left it stranded until that deadline.
        if not checking(1):
            return
        messages = self._messages()
        frontier = sweep_frontier.load(self.app, self.inspect)
        stranded = []
        for job_id, row in rows.items():
            if JobState(row["state"]).terminal:
                continue
            kinds = {path.kind for path in wake_paths(self.app, row, in_flight=messages,
                                                      frontier=frontier,
                                                      dynamodb=self.inspect)}
            assert kinds, (job_id, row)  # tests/integration/liveness.py: no way at all
            # A held row (paused, or a reset under way: core/holds.py) is left by design with
            # its sweep entry only: the message that met its hold is done with, and lifting
            # the hold (a resume, the reset asked again: the drain does both) hands it off.
            if row["state"] in (JobState.QUEUED.value, JobState.SLEEPING.value) and \
                    kinds == {"sweep"} and (job_id, int(row["epoch"])) in self.sent and \
                    not held(row):
                stranded.append(("stranded", job_id, row["state"], str(row.get("waiting"))))
            fire("every live job has a way to wake (one that waits)",
                 row["state"] != JobState.RUNNING.value)
        assert not self._violations("stranded", stranded, faulted, rows), stranded

    def _effects_applied_exactly_once(self, rows: dict[str, dict[str, Any]]) -> None:
        # Defect 2: the effect inside the step dies with an attempt that sleeps after it.
        applied: dict[str, dict[str, int]] = defaultdict(dict)
        for item in (from_av(item) for item in self.table_items(self.seams)):
            job_id, what = item["pk"].split("#")
            applied[job_id][what] = int(item["n"])
        for job_id, row in rows.items():
            if row["task"] != SEAM:
                continue
            counts = applied.get(job_id, {})
            assert counts.get("step", 0) <= 1 and counts.get("finish", 0) <= 1, (job_id, counts)
            by_worker = row["state"] == JobState.SUCCEEDED.value and \
                row["history"][-1]["by"] != ZOMBIE
            assert counts.get("finish", 0) == (1 if by_worker else 0), (job_id, counts, row)
            if by_worker and checking(2):
                assert counts.get("step", 0) == 1, (job_id, counts)
            fire("effects applied once (a seam job its worker finished)", by_worker)

    def _children_follow_their_parents(self, rows: dict[str, dict[str, Any]],
                                       faulted: list[str]) -> None:
        orphans, uncounted, unique = [], [], defaultdict(list)
        for job_id, row in rows.items():
            parent = rows.get(row.get(PARENT, ""))
            if parent is None or not JobState(row["state"]).live:
                continue
            state = JobState(parent["state"])
            # Defect 5: the parent ended without succeeding; its live child runs on.
            if state.terminal and state is not JobState.SUCCEEDED and \
                    not row.get("cancel_requested"):
                orphans.append(("child", job_id, state.value))
            # Defect 6: a counted parent's children are counted against the cap too.
            if parent.get(COUNTED) and not row.get(COUNTED):
                uncounted.append(job_id)
            # Defect 4: the unique default of a child's task is kept.
            if row["task"] == UNIQUE_CHILD:
                unique[row["tenant"]].append(job_id)
        if checking(5):
            assert not self._violations("child", orphans, faulted, rows), orphans
        if checking(6):
            assert not uncounted, uncounted
        if checking(4):
            assert all(len(ids) <= 1 for ids in unique.values()), unique
        children = [row for row in rows.values() if row.get(PARENT)]
        fire("children follow their ended parents (a child of a parent that ended)",
             sum(1 for row in children if JobState((rows.get(row[PARENT]) or {}).get(
                 "state", JobState.SUCCEEDED.value)).terminal))
        fire("children are counted under the cap (a live child of a counted parent)",
             sum(1 for row in children if JobState(row["state"]).live
                 and (rows.get(row[PARENT]) or {}).get(COUNTED)))
        fire("one live job per unique key (a live unique child)",
             sum(len(ids) for ids in unique.values()))

    def _event_ids_are_unique(self) -> None:
        # Defect 11: a workflow retry moves a step back without a new epoch.
        if checking(11):
            repeated = {i: n for i, n in self.event_ids.items() if n > 1}
            assert not repeated, repeated
            fire("event ids unique (a job that changed twice or more)",
                 len({i.rsplit(":", 2)[0] for i in self.event_ids}) < len(self.event_ids))

    def _bulk_acts_within_its_request(self) -> None:
        # Defect 9: a bulk job acts on what its search finds when it runs.
        if checking(9):
            late = {i: t for i, t in self.bulk_touched.items() if t[0] > t[1]}
            assert not late, late
            fire("a bulk action acts within its request (a job it changed)",
                 len(self.bulk_touched))

    def _attempts_stop_at_the_deadline_and_retries_rearm_callbacks(self) -> None:
        if checking(7):  # defect 7: the attempt's deadline is the job's at the latest
            assert not self.overruns, self.overruns
            fire("no attempt runs past its job's deadline (an attempt with one)",
                 self.deadline_attempts)
            self.deadline_attempts = 0
        if not checking(8):  # defect 8: a retry re-arms a timed-out callback
            return
        for job_id, retried in self.retried_at.items():
            job = self.latest.get(job_id)
            if job is not None and job.state is JobState.DEAD and job.error is not None \
                    and job.error.type == "CallbackTimeout" and job.finished_at is not None:
                assert job.finished_at >= retried + CALLBACK_S * 1000, (job_id, retried, job)
                fire("a retry re-arms a timed-out callback (one that timed out again)")

    def _cancel_a_parent_waiting_for_its_children(self) -> None:
        """A seam parent that waits for its children is cancelled, and its children are
        checked at once, before any worker runs them (checked after the round, they have
        finished). When no parent waits for live children, one is made: a parent on the
        bulk tenant runs up to its spawn (its children's messages not yet received)."""
        rows = self._rows()
        parents = sorted(job_id for job_id, row in rows.items()
                         if row["task"] == SEAM and JobState(row["state"]).live
                         and any(child.get(PARENT) == job_id
                                 and JobState(child["state"]).live for child in rows.values()))
        if not parents:
            self.submit_a_seam_job(["children"], 0, False, False, False, False, BULK_TENANT)
            while batch := self.app.queues.receive(self.url, max_messages=10):
                consume(Worker(self.app), batch)  # the children are sent by this round
                rows = self._rows()
                parents = sorted(job_id for job_id, row in rows.items()
                                 if row["task"] == SEAM and row["state"] == "SLEEPING"
                                 and row.get("waiting") == "children")
                if parents:
                    break
        if parents:
            with contextlib.suppress(LeaseholdError):  # it finished meanwhile
                control.cancel(self.app, parents[0])
                self._children_follow_their_parents(self._rows(), False)

    def seams_before_drain(self, round_: int) -> None:
        """The drain finishes every chain a check depends on (the weather is clear):

        * round 0: a live seam parent with children is cancelled (its children must follow);
        * every round: a seam job whose callback timed out is retried by hand, once (it waits
          again, with a fresh timeout, and times out again: the re-arm is checked);
        * round 1: the key is resumed (the first round met it paused, if it is); the seam
          workflows have failed: a bulk delete of their steps (its job runs in this round);
        * round 2: the workflows are retried, and a bulk retry of the bulk tenant's finished
          seam jobs, which its cap admits (202), runs.

        Deadlines pass on their own: each round moves the clock past a lease and a hand-off.
        """
        if not self.seams:
            return
        if round_ == 0:
            self._cancel_a_parent_waiting_for_its_children()
            # A counted job cancelled while live gives its slot back (the tenants' counters
            # are checked after every round).
            counted = sorted(j.job_id for j in self.latest.values()
                             if j.state.live and j.extra.get(COUNTED))
            if counted:
                with contextlib.suppress(LeaseholdError):
                    control.cancel(self.app, counted[0])
        for job_id in sorted(self.timed_out - self.drain_retried):
            job = self.latest.get(job_id)
            if job is None or not job.state.terminal:
                continue
            self.drain_retried.add(job_id)
            # Over its cap, or moved on: the check needs one such retry, not every one.
            with contextlib.suppress(RateLimited, LeaseholdError):
                retry_admitted(self.app, job_id, job.tenant, self.limits)
        if round_ == 1:
            key_usage.resume(self.app, TENANT, KEY)
            # The seam workflows have failed by now: a bulk delete of their steps (its job
            # runs in this round), then their retry (the next round).
            self._bulk("delete steps", "default")
        if round_ == 2:
            for workflow_id in self.seam_workflows:
                self.api.post(f"/workflows/{workflow_id}/retry", tenant="default")
            if not self._bulk_live() and any(
                    j.tenant == BULK_TENANT and j.state.terminal for j in self.latest.values()
                    if j.task == SEAM):
                live = sum(1 for j in self.latest.values() if j.tenant == BULK_TENANT
                           and j.state.live and j.extra.get(COUNTED))
                status = self._bulk("retry", BULK_TENANT)
                if live < self.limits.max_live:  # room for the bulk job: it is admitted
                    assert status == 202, ("a bulk retry refused with room", status, live)
