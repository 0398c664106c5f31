"""Durable execution's rules and invariants for the lifecycle state machine (issue 23).

Durable jobs take two steps around a sleep (short, through its delayed message; or long,
through the ticker) or a callback (completed by a rule, or timed out), and fail their first
attempts as planned; a worker may die at any write of a delivery (a step's store, the move
to SLEEPING, the finish), with the machine's lost responses and throttles around them.

After every step: a stored step was never run again after its store (its stored result is
the last one its function returned), a callback's outcome never changes once written in a
run (a manual re-run re-arms one without a value), and a SLEEPING job holds no lease and is
watched by the ticker (``due``) or the sweeper (``sweep``). The machine's drain checks that
none is stranded.
"""

from __future__ import annotations

import contextlib
import itertools
import uuid
from collections import defaultdict
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import from_av
from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.core.context import JobContext
from leasehold.core.policy import RetryPolicy
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.core.suspension import CallbackTimeout
from leasehold.durable import callbacks
from leasehold.durable.records import PREFIX
from leasehold.durable.runs import RECORD_RUN
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.worker import Worker
from tests.integration.helpers import submit_as_a_caller
from tests.integration.stateful_fired import fire

DURABLE_WRITES = "|".join(f"dynamodb.{op}" for op in ("PutItem", "UpdateItem",
                                                       "TransactWriteItems"))


class DurableRules:
    """Mixed into the lifecycle machine (``tests/integration/test_stateful.py``)."""

    app: Any
    injector: Any
    jobs: list[str]
    url: str
    inspect: Any
    latest: dict[str, Any]

    @initialize()
    def durable_tasks(self) -> None:
        # Kept if a chain that ran first made it (stateful_versions.py records its steps).
        self.step_runs: dict[tuple[str, str], list[str]] = getattr(
            self, "step_runs", defaultdict(list))
        self.callback_tokens: dict[str, str] = {}
        self.outcomes: dict[tuple[str, int], str] = {}
        self.durable_keys = itertools.count()

        def durable(payload: Any, ctx: JobContext) -> Any:
            def run(name: str) -> str:
                value = uuid.uuid4().hex
                self.step_runs[(ctx.job_id, name)].append(value)
                return value

            first = ctx.step("one", run, "one")
            if payload.get("sleep"):
                ctx.sleep(payload["sleep"])
            if payload.get("callback"):
                cb = ctx.callback("cb", timeout_seconds=200)
                self.callback_tokens[ctx.job_id] = cb.token
                with contextlib.suppress(CallbackTimeout):
                    cb.wait()
            second = ctx.step("two", run, "two")
            if ctx.attempt <= payload["fail_first"]:
                raise RuntimeError(f"planned failure {ctx.attempt}")
            return [first, second]

        self.app.registry.task("durable", max_attempts=4, retry=RetryPolicy(
            min_backoff_seconds=0, max_backoff_seconds=0.3))(durable)

    @rule(fail_first=st.integers(0, 2), wait=st.sampled_from(
        [{"sleep": 0.5}, {"sleep": 1000}, {"callback": True}, {}]))
    def submit_a_durable_job(self, fail_first: int, wait: dict[str, Any]) -> None:
        spec = JobSpec(task="durable", payload={"fail_first": fail_first, **wait},
                       idempotency_key=f"d{next(self.durable_keys)}")
        job = submit_as_a_caller(self.app, spec, "durable")
        if job is None:
            return
        if job.job_id not in self.jobs:
            self.jobs.append(job.job_id)

    @precondition(lambda self: getattr(self, "callback_tokens", None))
    @rule(data=st.data(), fail=st.booleans())
    def complete_a_callback(self, data: st.DataObject, fail: bool) -> None:
        job_id = data.draw(st.sampled_from(sorted(self.callback_tokens)))
        token = self.callback_tokens[job_id]
        try:
            done = callbacks.complete(self.app, token, "default", value="v",
                                      error="no" if fail else None)
        except Exception as exc:
            event(f"a completion refused: {type(exc).__name__}")
            return
        event(f"a completion: changed={done.changed}")

    @rule(write=st.integers(1, 6))
    def a_worker_dies_at_a_write(self, write: int) -> None:
        """One delivery whose process dies just before its n-th write (a step's store, the
        move to SLEEPING, the finish, ...): whatever it wrote stays; nothing else does."""
        batch = self.app.queues.receive(self.url, max_messages=1)
        if not batch:
            return
        calls = itertools.count(1)
        self.injector.faults.append(Fault(target=DURABLE_WRITES, kind="crash",
                                          when=lambda _, calls=calls: next(calls) == write))
        try:
            consume(Worker(self.app), batch)
        except InjectedCrash:
            event("a worker died at a write")
        except Exception:
            event("a batch failed")
        finally:
            self.injector.revive()
            self.injector.faults[:] = [f for f in self.injector.faults if f.kind != "crash"]

    # -- invariants ---------------------------------------------------------------------

    def _records(self) -> list[dict[str, Any]]:
        return [from_av(raw) for raw in self.table_items(self.app.settings.coordination_table)
                if raw["pk"]["S"].startswith(PREFIX)]

    @invariant()
    def a_stored_step_never_runs_again_and_a_callback_settles_once(self) -> None:
        if not hasattr(self, "step_runs"):
            return
        for record in self._records():
            job_id = record["pk"][len(PREFIX):]
            if record["kind"] == "step":
                runs = self.step_runs[(job_id, record["name"])]
                # The stored result is the last one its function returned: no execution
                # came after the store (at most once per store).
                assert runs and record["result"] == f'"{runs[-1]}"', (record, runs)
                fire("a stored step never runs again (a stored step)")
            if record["kind"] == "callback" and record.get("outcome"):
                # Once per run: a manual re-run re-arms a callback without a value (issue 29).
                run = int(record.get(RECORD_RUN) or 0)
                first = self.outcomes.setdefault((job_id, run), record["outcome"])
                assert record["outcome"] == first, (record, first)

    @invariant()
    def a_sleeping_job_holds_no_lease_and_is_watched(self) -> None:
        # The raw rows (index attributes included) of the jobs the store last wrote SLEEPING:
        # a read each, not a scan of the table after every step.
        for job in list(self.latest.values()):
            if job.state is not JobState.SLEEPING:
                continue
            item = from_av(self.inspect.get_item(
                TableName=self.app.settings.jobs_table, ConsistentRead=True,
                Key=job_key(job.job_id))["Item"])
            if item["state"] != JobState.SLEEPING.value:
                continue
            assert "lease_owner" not in item, item
            fire("a sleeping job holds no lease and is watched (a sleeping job)")
            if "lease_expires_at" in item:  # handed off: the sweeper finds a lost message
                assert item["sweep_at"] <= item["lease_expires_at"], item
                assert "due_shard" not in item, item
            else:  # a long sleep: the ticker wakes it (a sweep entry it kept is only passed)
                assert "due_shard" in item, item
