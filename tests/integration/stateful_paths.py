"""The paths the swarm rarely draws within an example, met once in every example (issue 44).

``make soak`` fails if a check never met its path. At ``make test``'s budget these stayed at
0: each is the path of a rule group the swarm enables in some examples only, drawn late if
at all. :meth:`PathRules.meet_the_rare_paths` builds each once, from the machine's
``a_tenant_at_its_cap_with_dead_jobs`` initializer (the checks then look at them after every
step; each group's rules still go deeper when the swarm enables it):

* a paused job (``stateful_pausereset``: it never starts and holds no slot);
* a debounce window open (``stateful_flowkeys``: at most one per key);
* a job past its ``expires_at`` when a worker meets it (``stateful_flowkeys``: it never ran);
* a keyed job RUNNING, its worker gone quiet (``stateful_flow``: no key above its limit);
* a counted job of the lean tenant, its cap set and its live jobs counted in
  (``stateful_leanadmit``);
* a plain job (no key, no deadline, no cap: every other submission of the machine has one),
  sent first (issue 46, ``lifecycle/handoff.py``), leased by a worker that dies: its row has
  no sweep entry, and its message, in a queue until a worker that meets it after the lease
  ran out re-drives it, is the only way it is found (the sweep-index check's other branch;
  the drain moves SQS's timers with its clock, so the message shows again there).

The remote worker's two paths (a finished lease's repeated finish, a zombie's request) are
met from that group's own initializer (``stateful_remote.remote_jobs``), which makes its
jobs.
"""

from __future__ import annotations

from typing import Any

from hypothesis import event

from leasehold.aws.queues import Message
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import LeaseholdError
from leasehold.lifecycle import leasing, pausing
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Delivery, Outcome
from tests.integration.stateful_flowkeys import KEYS


class PathRules:
    """Mixed into the lifecycle machine, with the mixins whose rules it calls."""

    app: Any
    clock: Any
    jobs: list[str]
    zombies: list[Any]
    _follow: Any
    _run: Any
    _clear_weather: Any
    submit_debounced: Any
    submit_keyed_job: Any
    submit_to_the_lean_tenant: Any
    set_the_lean_cap_and_count_live_jobs_in: Any

    def meet_the_rare_paths(self) -> None:
        with self._clear_weather():
            self.submit_debounced(KEYS[0], 0)
            paused = submit(self.app, JobSpec(task="work", payload={"fail_first": 0},
                                              idempotency_key=f"paused{len(self.jobs)}")).job
            self._follow(paused.job_id)
            pausing.pause(self.app, paused.job_id)
            expiring = submit(self.app, JobSpec(
                task="work", payload={"fail_first": 0},
                expires_at_ms=self.app.now() + 1000)).job
            self._follow(expiring.job_id)
            self.clock.advance(2)
            self._run(expiring.job_id)
            if self.app.store.get(expiring.job_id).state is not JobState.EXPIRED:
                event("a job past its expiry was not expired")
            self._a_keyed_job_runs_and_its_worker_goes_quiet()
            self.set_the_lean_cap_and_count_live_jobs_in(None)
            self.submit_to_the_lean_tenant(0)  # admitted under the cap: counted
            self._a_plain_job_whose_worker_dies()

    def _a_plain_job_whose_worker_dies(self) -> None:
        plain = submit(self.app, JobSpec(task="work", payload={"fail_first": 0})).job
        self._follow(plain.job_id)
        try:
            leased = leasing.lease(self.app, "crashed",
                                   Delivery(Message(plain.job_id, plain.epoch).body()))
        except LeaseholdError:
            return
        if not isinstance(leased, Outcome):
            self.zombies.append((leased[0], leased[1]))

    def _a_keyed_job_runs_and_its_worker_goes_quiet(self) -> None:
        before = set(self.jobs)
        self.submit_keyed_job(("acme", "k1"), 0)
        for job_id in [j for j in self.jobs if j not in before]:
            job = self.app.store.get(job_id)
            try:
                leased = leasing.lease(self.app, "crashed",
                                       Delivery(Message(job_id, job.epoch).body()))
            except LeaseholdError:
                continue
            if not isinstance(leased, Outcome):
                self.zombies.append((leased[0], leased[1]))
