"""The state machine's deadline chains (issue 44): the jobs the deadline checks look at.

At random a job with a ``deadline_seconds`` is rarely still QUEUED when its deadline passes
and a sweep runs (other rules deliver it first), is never re-queued past its deadline, and
is never re-run by hand once its deadline passed. One rule builds each chain in one step:

* held QUEUED past its deadline (its message not yet taken), the clock past the deadline,
  a sweep: the machine's check "no QUEUED row past its deadline after a sweep" then looks
  at it (the sweeper ends it DEAD, ``DeadlineExceeded``, reading it by its sweep entry,
  which its deadline bounds);
* or leased by a worker that is lost, a sweep while it runs (the frontier moves on), the
  clock past its lease and its deadline, and the sweeper's recovery whose re-send is lost:
  re-queued past its deadline, its sweep entry must stay where the sweeper reads
  (the machine's sweep-index check), and the next sweeps end it;
* then (both) the job, ended by its deadline, is re-run by hand and delivered at once: a
  re-run gets its deadline again from the re-run, so it runs (it is not ended at its lease
  by the deadline of its first run).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import rule

from leasehold.aws.faults import Fault
from leasehold.aws.queues import Message
from leasehold.core.jobs import Job
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle import control
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Delivery, Worker
from tests.integration.stateful_fired import fire

DEADLINE_S = 10


class DeadlineRules:
    """Mixed into the lifecycle machine; uses its ``app``, ``clock``, ``injector``, ``url``,
    ``jobs``, ``keys``, ``runs``, ``seen_bodies``, ``_sweep`` and ``_crash_after_lease``."""

    app: Any
    clock: Any
    injector: Any
    url: str
    jobs: list[str]
    keys: Any
    runs: Any
    seen_bodies: list[str]
    _sweep: Any
    _crash_after_lease: Any

    @rule(running=st.booleans())
    def a_job_past_its_deadline_meets_the_sweeper(self, running: bool) -> None:
        """The chains above, with the weather held off (what they exercise is the deadline
        path, not a fault)."""
        weather = self.injector.faults[:]
        self.injector.faults.clear()
        try:
            self._past_its_deadline(running)
        finally:
            self.injector.faults[:] = weather

    def _past_its_deadline(self, running: bool) -> None:
        spec = JobSpec(task="work", payload={"fail_first": 0}, deadline_seconds=DEADLINE_S,
                       idempotency_key=f"d{next(self.keys)}")
        job = submit(self.app, spec).job
        self.jobs.append(job.job_id)
        grace = self.app.settings.skew_grace_seconds
        if not running:
            self.clock.advance(DEADLINE_S + grace + 1)
            self._sweep()  # checks that nothing QUEUED is left past its deadline
        else:
            batch = self.app.queues.receive(self.url, max_messages=10)
            self.seen_bodies += [m.body for m in batch]
            mine = [m for m in batch if json.loads(m.body)["job_id"] == job.job_id]
            leased = self._crash_after_lease(mine[0]) if mine else None
            try:
                consume(Worker(self.app), [m for m in batch if m not in mine])
            except Exception:  # the others' batch: Lambda would retry it
                event("a batch failed")
            if leased is None:
                return
            self.clock.advance(5)
            self._sweep()  # the frontier moves on while the job runs
            self.clock.advance(self.app.settings.lease_seconds + DEADLINE_S + grace + 1)
            # Its own re-send only: another job's hand-off in the same pass (which comes
            # first depends on the other jobs' sweep entries) would be lost instead.
            self.injector.faults.append(Fault(
                target="sqs.SendMessage", kind="fail", times=1,
                when=lambda params: job.job_id in json.dumps(params)))
            self._sweep()  # re-queued past its deadline, its re-send lost
            self.injector.faults.clear()
            for _ in range(3):
                self.clock.advance(grace + 1)
                self._sweep()
        ended = self.app.store.get(job.job_id)
        if ended.state is not JobState.DEAD or ended.error is None or \
                ended.error.type != "DeadlineExceeded":
            event(f"a job past its deadline ended {ended.state.value}")
            return
        self._re_run_past_its_deadline(ended)

    def _re_run_past_its_deadline(self, job: Job) -> None:
        runs = self.runs[job.job_id]
        again = control.retry(self.app, job.job_id)
        Worker(self.app).process(Delivery(Message(again.job_id, again.epoch).body()))
        after = self.app.store.get(job.job_id)
        assert self.runs[job.job_id] == runs + 1 and after.state is JobState.SUCCEEDED, (
            "a re-run by hand ended by its first run's deadline", after.state, after.error)
        fire("a job re-run by hand after its deadline passed runs (a re-run)")
