"""The state machine's rules and invariants for concurrency keys (``leasehold.flow``).

Mixed into ``tests/integration/test_stateful.py``'s machine, so keyed jobs meet every other
rule there: lost responses and throttles on any write, errors past the retries, workers that
die right after their lease (zombies that come back), duplicates, cancels, manual retries,
sweeps and clock jumps. After every step no key has more than its limit RUNNING (a zombie
whose lease was not taken over is still RUNNING in the table, so it counts), and each key's
slot holds exactly its RUNNING jobs: never a leaked slot, never one given back twice. At the
drain every key's slot is free and no job is left parked.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from leasehold.core.context import JobContext
from leasehold.core.flowcontrol import GATE, slot_id
from leasehold.core.jobs import Job
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import LeaseholdError, RateLimited
from leasehold.flow import slots
from leasehold.lifecycle.submission import submit
from tests.integration.stateful_fired import fire

#: (tenant, key) -> limit. A tenant's key is its own: "k0" of acme is not "k0" of zeta.
FLOW_KEYS = {("acme", "k0"): 1, ("acme", "k1"): 2, ("zeta", "k0"): 2}
FLOW_TASK = "keyed"


class FlowRules:
    """Rules and invariants for concurrency keys; expects the machine's ``app``, ``jobs``,
    ``latest``, ``keys`` and ``runs``."""

    app: Any
    jobs: list[str]
    latest: dict[str, Job]
    keys: Any
    runs: Counter[str]

    def _flow_task(self) -> None:
        registry = self.app.registry
        if FLOW_TASK in registry:
            return

        @registry.task(FLOW_TASK, max_attempts=3)
        def keyed(payload: Any, ctx: JobContext) -> Any:
            self.runs[ctx.job_id] += 1
            if ctx.attempt <= payload["fail_first"]:
                raise RuntimeError(f"planned failure {ctx.attempt}")
            return ctx.attempt

    @rule(key=st.sampled_from(sorted(FLOW_KEYS)), fail_first=st.integers(0, 3))
    def submit_keyed_job(self, key: tuple[str, str], fail_first: int) -> None:
        """A job with a concurrency key; a caller whose submission failed retries it."""
        self._flow_task()
        tenant, name = key
        spec = JobSpec(task=FLOW_TASK, payload={"fail_first": fail_first, "key": name},
                       tenant=tenant, idempotency_key=f"f{next(self.keys)}",
                       concurrency={"key": "{payload.key}", "limit": FLOW_KEYS[key]})
        for _ in range(3):
            try:
                job = submit(self.app, spec).job
            except RateLimited:
                return
            except LeaseholdError:
                continue
            except Exception:  # a write past its retries: the caller retries with its key
                event("a keyed submission failed")
                continue
            if job.job_id not in self.jobs:
                self.jobs.append(job.job_id)
            return

    def _flow_holders(self) -> dict[tuple[str, str], set[str]]:
        ddb, settings = self.app.clients.dynamodb, self.app.settings
        return {key: slots.holders(slots.read(ddb, settings, slot_id(*key)))
                for key in FLOW_KEYS}

    def _flow_running(self) -> dict[tuple[str, str], set[str]]:
        running: dict[tuple[str, str], set[str]] = {key: set() for key in FLOW_KEYS}
        for job in self.latest.values():
            gate = job.extra.get(GATE) or {}
            key = (job.tenant, gate.get("concurrency", {}).get("key"))
            if job.state is JobState.RUNNING and key in running:  # another mixin's keys aside
                running[key].add(
                    slots.member(job.job_id, job.epoch))
        return running

    @invariant()
    def no_key_runs_more_than_its_limit_and_slots_hold_exactly_the_running(self) -> None:
        running = self._flow_running()
        for key, limit in FLOW_KEYS.items():
            assert len(running[key]) <= limit, (key, running[key])
        assert self._flow_holders() == running
        fire("no key runs more than its limit (a keyed job running)",
             sum(len(members) for members in running.values()))

    def flow_drained(self) -> None:
        """At the drain: every key's slot free, nothing parked."""
        assert all(not members for members in self._flow_holders().values())
        for job in self.app.store.batch_get(self.jobs):
            assert "parked_key" not in job.extra, job
