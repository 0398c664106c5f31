"""The state machine's code-version chain (issue 44): a durable job outlives a deploy.

A durable task's job runs its first step and sleeps under code version N; a deploy then
changes the task's code (a step renamed, behind ``ctx.patched``) and the runtime's code
version to N+1; a new job runs under N+1. Both wake and finish on N+1. The check: the old
job replays on its old branch (its first step's work not run again, its result the old
one) and the new job takes the patched path; the row keeps the version that first ran the
job, and each attempt's lease entry the version it ran on.

Each chain has a task of its own, whose code stays patched after its deploy (patched code
replays both histories, so a job the chain leaves to the drain still replays). The chain
clears the fault weather for its own writes, and is met once in every example from the
machine's ``a_tenant_at_its_cap_with_dead_jobs`` initializer, and again as a swarm rule.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter, defaultdict
from typing import Any

from hypothesis import event
from hypothesis.stateful import rule

from leasehold.core.context import JobContext
from leasehold.core.jobs import CODE_VERSION
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.submission import submit
from leasehold.time import ticker
from tests.integration.stateful_fired import fire

VERSIONED = "versions.order"
#: Longer than SQS holds a message: the wake is the ticker's, on the machine's clock.
NAP_S = 1000
PATCH = "rename-charge"


class VersionRules:
    """Mixed into the lifecycle machine after :class:`~.stateful_reruns.ReRunRules` (its
    ``_run``, ``_follow`` and ``_clear_weather``); uses the machine's ``app`` and ``clock``."""

    app: Any
    clock: Any
    _run: Any
    _follow: Any
    _clear_weather: Any

    def versions_setup(self) -> None:
        self.deploys = itertools.count()
        #: Shared with the durable mixin's check (a stored step never runs again).
        self.step_runs: dict[tuple[str, str], list[str]] = defaultdict(list)
        #: Each chain's task -> whether its deployed code has the patch.
        self.patched_code: dict[str, bool] = {}
        #: (job, step) -> how often the step's work ran.
        self.versioned_work: Counter[tuple[str, str]] = Counter()

    def _versioned_task(self, name: str) -> None:
        self.patched_code[name] = False

        def work(job_id: str, step: str) -> Any:
            def run() -> str:
                self.versioned_work[(job_id, step)] += 1
                # What the durable mixin's check reads: each run of each stored step.
                self.step_runs[(job_id, step)].append(step)
                return step
            return run

        @self.app.registry.task(name, max_attempts=2)
        def order(payload: Any, ctx: JobContext) -> Any:
            if self.patched_code[name] and ctx.patched(PATCH):
                first = ctx.step("bill", work(ctx.job_id, "bill"))
            else:
                first = ctx.step("charge", work(ctx.job_id, "charge"))
            ctx.sleep(NAP_S)
            return [first, ctx.step("ship", work(ctx.job_id, "ship"))]

    def _deploy(self, version: str) -> None:
        self.app.settings = dataclasses.replace(self.app.settings, code_version=version)

    @rule()
    def a_durable_job_outlives_a_deploy(self) -> None:
        n = next(self.deploys)
        name, old_version, new_version = f"{VERSIONED}{n}", f"v{2 * n}", f"v{2 * n + 1}"
        self._versioned_task(name)
        with self._clear_weather():
            self._deploy(old_version)
            old = submit(self.app, JobSpec(task=name, payload={})).job.job_id
            self._follow(old)
            self._run(old)
            self.patched_code[name] = True  # the deploy: the rename behind ctx.patched
            self._deploy(new_version)
            new = submit(self.app, JobSpec(task=name, payload={})).job.job_id
            self._follow(new)
            self._run(new)
            if {self.app.store.get(j).state for j in (old, new)} != {JobState.SLEEPING}:
                event("a versioned job did not sleep as planned")
                return
            self.clock.advance(NAP_S + 1)
            ticker.promote_due(self.app)
            for job_id in (old, new):
                self._run(job_id)
        done = {job_id: self.app.store.get(job_id) for job_id in (old, new)}
        assert done[old].state is JobState.SUCCEEDED and \
            done[old].result == ["charge", "ship"], ("the old run left its branch", done[old])
        assert done[new].state is JobState.SUCCEEDED and \
            done[new].result == ["bill", "ship"], ("a new run missed the patch", done[new])
        assert self.versioned_work[(old, "charge")] == 1 and \
            self.versioned_work[(old, "bill")] == 0, ("a replayed step ran again",
                                                      dict(self.versioned_work))
        for job_id, first in ((old, old_version), (new, new_version)):
            leases = [t.version for t in done[job_id].history if t.target == "RUNNING"]
            assert done[job_id].extra.get(CODE_VERSION) == first and \
                leases[0] == first and leases[-1] == new_version, (
                    "a row or lease entry names the wrong code version", done[job_id])
        fire("old runs replay on their branch, new runs take the patch (a deploy)")
