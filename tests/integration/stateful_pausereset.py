"""Pausing one job and resetting a durable job from a step, in the lifecycle state machine
(issue 36).

Any job of the machine may be paused and resumed (the flow mixin's keyed jobs too), and
durable jobs of three steps around a sleep, a callback or a child are reset from a step,
some of those resets forced through several writes and killed at one of them; all of it under
the machine's lost responses, throttles and crashed workers.

After every step: a held job (paused, or a reset under way) is never leased (no lease is
granted to a row that carries a hold, and no RUNNING job was paused before it started); a
paused job that is not running holds no concurrency slot; and right after a reset answers,
the job holds no record from its step on. At the drain every paused job is resumed and every
reset a crash left under way is asked again, and everything must finish.
"""

from __future__ import annotations

import contextlib
import itertools
import uuid
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import from_av, query, to_av
from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.aws.queues import Message
from leasehold.core.context import JobContext
from leasehold.core.holds import HOLDS, PAUSED_AT, RESET_FROM, held
from leasehold.core.jobs import Job
from leasehold.core.policy import RetryPolicy
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.core.suspension import CallbackTimeout
from leasehold.durable import callbacks, records, reset
from leasehold.lifecycle import pausing
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Delivery, Worker
from leasehold.tenancy.admission import retry_admitted
from tests.integration.helpers import submit_as_a_caller
from tests.integration.stateful_fired import fire

#: The resettable job's durable calls, in order (the wait between is one of them or none).
STEPS = ("one", "two")
RESET_WRITES = "|".join(f"dynamodb.{op}" for op in (
    "UpdateItem", "TransactWriteItems", "BatchWriteItem", "DeleteItem"))


class PauseResetRules:
    """Mixed into the lifecycle machine (``tests/integration/test_stateful.py``), first, so
    that its drain hooks run before the others'."""

    app: Any
    clock: Any
    injector: Any
    jobs: list[str]
    inspect: Any
    latest: dict[str, Any]
    succeeded: Any
    limits: Any
    step_runs: Any

    @initialize()
    def resettable_tasks(self) -> None:
        self.resettable: list[str] = []
        self.reset_tokens: dict[str, str] = {}
        self.reset_keys = itertools.count()
        self.app.store.observers.append(self._held_never_leased)

        def resettable(payload: Any, ctx: JobContext) -> Any:
            def run(name: str) -> str:
                # Counted where the durable mixin's invariant reads every stored step's runs.
                value = f"{name}:{uuid.uuid4().hex[:8]}"
                self.step_runs[(ctx.job_id, name)].append(value)
                return value

            def later() -> None:
                # Each record at its own millisecond: their order (before ``seq``) is their time.
                self.clock.advance(0.001)

            first = ctx.step("one", run, "one")
            later()
            if payload.get("sleep"):
                ctx.sleep(payload["sleep"])
                later()
            if payload.get("callback"):
                cb = ctx.callback("cb", timeout_seconds=200)
                self.reset_tokens[ctx.job_id] = cb.token
                later()
                with contextlib.suppress(CallbackTimeout):
                    cb.wait()
            if payload.get("spawn"):
                child = ctx.spawn("resettable-child", None)
                later()
                ctx.wait_for([child])
            second = ctx.step("two", run, "two")
            later()
            if ctx.attempt <= payload["fail_first"]:
                raise RuntimeError(f"planned failure {ctx.attempt}")
            return [first, second]

        self.app.registry.task("resettable", max_attempts=4, retry=RetryPolicy(
            min_backoff_seconds=0, max_backoff_seconds=0.3))(resettable)
        # One attempt: DEAD at its planned failure, after both steps.
        self.app.registry.task("resettable-once", max_attempts=1)(resettable)
        self.app.registry.task("resettable-child")(lambda payload, ctx: "child")

    def _held_never_leased(self, job: Job, source: JobState | None) -> None:
        # The row the lease wrote (its own returned image): a held row is never leased.
        if job.state is JobState.RUNNING and source in (JobState.QUEUED, JobState.SLEEPING):
            assert not held(job.extra), job

    # -- rules --------------------------------------------------------------------------

    @rule(fail_first=st.integers(0, 1), wait=st.sampled_from(
        [{"sleep": 0.5}, {"sleep": 1000}, {"callback": True}, {"spawn": True}, {}]))
    def submit_a_resettable_job(self, fail_first: int, wait: dict[str, Any]) -> None:
        spec = JobSpec(task="resettable", payload={"fail_first": fail_first, **wait},
                       idempotency_key=f"r{next(self.reset_keys)}")
        job = submit_as_a_caller(self.app, spec, "resettable")
        if job is None:
            return
        if job.job_id not in self.jobs:
            self.jobs.append(job.job_id)
            self.resettable.append(job.job_id)

    @precondition(lambda self: self.jobs)
    @rule(data=st.data())
    def pause_a_job(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(self.jobs))
        try:
            pausing.pause(self.app, job_id)
            event("a job paused")
        except Exception as exc:
            event(f"a pause refused: {type(exc).__name__}")

    @precondition(lambda self: self.jobs)
    @rule(data=st.data())
    def resume_a_job(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(self.jobs))
        try:
            pausing.resume(self.app, job_id)
        except Exception as exc:
            event(f"a resume refused: {type(exc).__name__}")

    @precondition(lambda self: getattr(self, "reset_tokens", None))
    @rule(data=st.data())
    def complete_a_resettable_callback(self, data: st.DataObject) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.reset_tokens)))
        with contextlib.suppress(Exception):
            callbacks.complete(self.app, self.reset_tokens[job_id], "default", value="v")

    @precondition(lambda self: getattr(self, "resettable", None))
    @rule(data=st.data(), step=st.sampled_from(STEPS),
          crash_at=st.one_of(st.none(), st.integers(1, 4)))
    def reset_a_job(self, data: st.DataObject, step: str, crash_at: int | None) -> None:
        """A reset from ``step``; with ``crash_at``, forced through several writes (the hold,
        the deletions, the re-run) and killed just before the n-th."""
        # A job that recorded a step to reset from (a refusal teaches little): the step
        # asked for, or its first one.
        ready = [j for j in self.resettable if (job := self.latest.get(j)) is not None
                 and job.state in reset.RESETTABLE and "step#one" in self._reset_records(j)]
        if not ready:
            event("no job to reset yet")
            return
        job_id = data.draw(st.sampled_from(ready))
        self._reset_and_check(job_id, step, crash_at)

    @rule(wait=st.sampled_from([{}, {"sleep": 1000}, {"callback": True}, {"spawn": True}]),
          dead=st.booleans(), step=st.sampled_from(STEPS),
          crash_at=st.one_of(st.none(), st.integers(1, 4)))
    def reset_a_fresh_job(self, wait: dict[str, Any], dead: bool, step: str,
                          crash_at: int | None) -> None:
        """In one step: a durable job of three steps (or two, ended: SUCCEEDED, or DEAD at its
        one attempt) is submitted and delivered until it has recorded its first step, then
        reset; so that resets land in the default budget (``reset_a_job`` needs the rules to
        line up), under the weather of the moment."""
        task = "resettable-once" if dead and not wait else "resettable"
        spec = JobSpec(task=task, payload={"fail_first": int(dead), **wait},
                       idempotency_key=f"r{next(self.reset_keys)}")
        try:
            job = submit(self.app, spec).job
        except Exception:
            event("a fresh resettable submission failed")
            return
        self.jobs.append(job.job_id)
        self.resettable.append(job.job_id)
        for _ in range(3):  # the weather may fail a delivery: the next one takes over
            job = self.latest.get(job.job_id, job)
            if job.state is not JobState.QUEUED:
                break
            with contextlib.suppress(Exception):
                Worker(self.app).process(Delivery(Message(job.job_id, job.epoch).body()))
        job = self.latest.get(job.job_id, job)
        if job.state not in reset.RESETTABLE or \
                "step#one" not in self._reset_records(job.job_id):
            event("a fresh resettable job did not get ready")
            return
        event(f"a fresh job reset while {job.state.value}")
        self._reset_and_check(job.job_id, step, crash_at)

    def _reset_and_check(self, job_id: str, step: str, crash_at: int | None) -> None:
        """A reset from ``step`` (its first one if ``step`` is not recorded); right after it
        answers, the job holds no record from the step on. Killed at a write, it has dropped
        only records from the step on, newest first."""
        before = self._reset_stored(job_id)
        if f"step#{step}" not in before:
            step = "one"
        one_write = reset.ONE_WRITE
        if crash_at is not None:
            reset.ONE_WRITE = 0
            calls = itertools.count(1)
            self.injector.faults.append(Fault(
                target=RESET_WRITES, kind="crash",
                when=lambda _, calls=calls: next(calls) == crash_at))
        try:
            done = reset.reset(self.app, job_id, None, step, self._reset_rerun)
        except InjectedCrash:
            event("a reset died at a write")
            self._reset_prefix_kept(job_id, step, before)
            return
        except Exception as exc:
            event(f"a reset refused: {type(exc).__name__}")
            return
        finally:
            reset.ONE_WRITE = one_write
            self.injector.revive()
            self.injector.faults[:] = [f for f in self.injector.faults if f.kind != "crash"]
        event(f"a reset from {step}")
        assert done.state is JobState.QUEUED and RESET_FROM not in done.extra, done
        self._reset_counted(done)
        kept = set(self._reset_records(job_id))
        later = {f"step#{s}" for s in STEPS[STEPS.index(step):]}
        if step == "one":  # the wait comes after step one: dropped with it
            later |= {k for k in kept if not k.startswith("step#")}
        assert not kept & later, (job_id, step, kept)

    def _reset_prefix_kept(self, job_id: str, step: str,
                           before: dict[str, dict[str, Any]]) -> None:
        """What a reset killed at a write leaves: the records before the step all kept; of the
        rest, the deleted ones are the newest (deletions go newest first)."""
        kept = set(self._reset_records(job_id))
        assert kept <= set(before), (job_id, kept, set(before))
        drop = reset.dropped(before, step)
        assert {k for k in before if k not in {str(r["sk"]) for r in drop}} <= kept, \
            (job_id, step, kept)
        gone = [str(r["sk"]) in kept for r in drop]  # newest first: False* then True*
        assert gone == sorted(gone), (job_id, step, kept, [r["sk"] for r in drop])

    def _reset_counted(self, done: Job) -> None:
        """A SUCCEEDED job reset runs (and succeeds) once more, on purpose: the machine's
        count of its successes starts again."""
        if done.history and done.history[-1].source == JobState.SUCCEEDED.value:
            self.succeeded[done.job_id] -= 1
            if not self.succeeded[done.job_id]:  # no success of this run yet: none counted
                del self.succeeded[done.job_id]

    def _reset_rerun(self, job: Job, writes: Any, remove: Any, reason: str) -> Job:
        return retry_admitted(self.app, job.job_id, None, self.limits, job=job, writes=writes,
                              remove=remove, reason=reason)

    def _reset_records(self, job_id: str) -> list[str]:
        return list(self._reset_stored(job_id))

    def _reset_stored(self, job_id: str) -> dict[str, dict[str, Any]]:
        """The job's durable records as stored, by sort key (read past the faults)."""
        return {str(item["sk"]): item for item in query(
            self.inspect, TableName=self.app.settings.coordination_table,
            KeyConditionExpression="pk = :pk", ConsistentRead=True,
            ExpressionAttributeValues=to_av({":pk": records.partition(job_id)}))}

    # -- invariants ---------------------------------------------------------------------

    @invariant()
    def a_paused_job_never_started_and_holds_no_slot(self) -> None:
        if not hasattr(self, "resettable"):
            return
        holders: set[str] = set()
        pages = self.inspect.get_paginator("scan").paginate(
            TableName=self.app.settings.tenants_table)
        for page in pages:
            for raw in page["Items"]:
                holders |= {h.split("#", 1)[0] for h in raw.get("holders", {}).get("SS", [])}
        for job_id in self.jobs:
            raw = self.inspect.get_item(TableName=self.app.settings.jobs_table,
                                        ConsistentRead=True, Key=job_key(job_id))
            if "Item" not in raw:
                continue
            row = from_av(raw["Item"])
            if not any(row.get(h) is not None for h in HOLDS):
                continue
            fire("a paused job never started and holds no slot (a held job)")
            if row["state"] == JobState.RUNNING.value:
                # Paused while it ran (it finishes its attempt), never leased once paused.
                assert row.get(PAUSED_AT) is None or \
                    int(row[PAUSED_AT]) >= int(row["started_at"]), row
                assert row.get(RESET_FROM) is None, row
            else:
                assert job_id not in holders, (job_id, row["state"])

    # -- the drain ------------------------------------------------------------------------

    def seams_before_drain(self, round_: int) -> None:
        """An operator resumes every paused job and asks again for every reset a crash left
        under way, before the others' drain steps."""
        # Every paused job: the rare paths (stateful_paths.py) pause one in an initializer
        # of their own, which may run without this group's (a budget of fewer steps than
        # the machine has initializers runs only some of them).
        if round_ == 0:
            for job in self.app.store.batch_get(self.jobs):
                if job.extra.get(RESET_FROM) is not None and hasattr(self, "resettable"):
                    self._reset_counted(reset.reset(self.app, job.job_id, None,
                                              str(job.extra[RESET_FROM]), self._reset_rerun))
                    event("a reset finished at the drain")
                if job.extra.get(PAUSED_AT) is not None:
                    pausing.resume(self.app, job.job_id)
        super().seams_before_drain(round_)  # type: ignore[misc]
