"""A remote worker in the lifecycle state machine (issue 34): jobs of an external task
(``Settings.external_tasks``, pool ``remote``) leased, heartbeated, completed and failed
(retryable or not) over the in-process API, each request sent once, LOST (the DynamoDB
write lands and its answer is dropped: a ``lose-raise`` fault, so the worker sends it
again), REPEATED (sent twice), or sent by a ZOMBIE (a token whose lease the sweeper took
over once the machine's clock passed it), among the machine's other rules and faults.

Checked at each request: a zombie's heartbeat, complete or fail is answered 409
``lease_lost`` and changes nothing; a finish repeated with the token that finished the job
answers 200 and changes nothing more; the holder's request lands once. Which lease finished a
job comes from the machine's own record of which finish it was answered 200 for, never from
the row's ``lease_owner`` (the field the product answers from: a check that read it would
accept the product's wrong answer).
The machine's own invariants cover the rest (no job SUCCEEDED twice, every attempt within
its job's limit), and its drain leases and completes every remote job left.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from leasehold.aws.faults import Fault
from leasehold.core.policy import RetryPolicy
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle import sweeper
from leasehold.remote.tokens import Token
from tests.integration.api_client import ApiClient, Reply
from tests.integration.helpers import submit_as_a_caller
from tests.integration.stateful_fired import fire

POOL = "remote"
TASK = "remote.work"
#: What the machine's Settings declare (``external_tasks``).
EXTERNAL = {POOL: (TASK,)}
WORKER = "remote-w"
ACTIONS = ("heartbeat", "complete", "fail", "fail-final")
DELIVERIES = ("once", "lost", "repeated")
#: A row's fields a request may change (and a refused one must not).
FIELDS = ("state", "epoch", "attempt", "lease_owner", "lease_expires_at", "result_json",
          "finished_at")


class RemoteRules:
    """Mixed into the lifecycle machine; uses its ``app``, ``clock``, ``injector``, ``jobs``
    and ``failed``; ``remote_owners`` tells the seams check which leases it holds."""

    app: Any
    clock: Any
    injector: Any
    jobs: list[str]
    failed: tuple[type[BaseException], ...]

    @initialize(attempts=st.lists(st.integers(1, 3), min_size=1, max_size=2))
    def remote_jobs(self, attempts: list[int]) -> None:
        self.remote_api = ApiClient(self.app)
        self.remote_keys = itertools.count()
        #: Every lease the remote worker was granted: (job id, token).
        self.remote_leases: list[tuple[str, str]] = []
        #: Their owners (the seams check's live holders).
        self.remote_owners: set[str] = set()
        #: Job -> the token of the lease whose report ended its latest finished attempt (a
        #: finish answered 200, a heartbeat that ended it CANCELLED, or a report whose answer
        #: was lost but whose write the machine saw land): the machine's own record of which
        #: lease finished it. A later lease's finish replaces it; a sweep or a re-run does
        #: not (the server answers that lease's repeated finish with the job as it is).
        self.remote_finished: dict[str, str] = {}
        for n in attempts:
            self.submit_a_remote_job(n)
        if len(attempts) < 2:
            self.submit_a_remote_job(1)
        # The checks' two paths, met in every example (the swarm rarely draws them): a
        # finished lease's finish sent again, and a request of a lease taken over.
        got = self._lease(2, False)
        if got:
            self._report(*got[0], "complete", "once")
            self._report(*got[0], "complete", "once")
        if len(got) > 1:
            self.clock.advance(self.app.settings.lease_seconds
                               + self.app.settings.skew_grace_seconds + 1)
            sweeper.sweep(self.app)
            self._lease(10, False)
            self._report(*got[1], "heartbeat", "once")

    def _remote(self) -> bool:
        return bool(getattr(self, "remote_leases", None))

    # -- rules --------------------------------------------------------------------------

    @rule(attempts=st.integers(1, 3))
    def submit_a_remote_job(self, attempts: int) -> None:
        spec = JobSpec(task=TASK, payload={"n": attempts}, max_attempts=attempts,
                       idempotency_key=f"remote{next(self.remote_keys)}",
                       retry=RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0.3))
        job = submit_as_a_caller(self.app, spec, "remote", self.failed)
        if job is None:
            return
        assert job.pool == POOL, job
        if job.job_id not in self.jobs:
            self.jobs.append(job.job_id)

    @rule(max_jobs=st.integers(1, 3), lost=st.booleans())
    def remote_lease(self, max_jobs: int, lost: bool) -> None:
        """``lost``: the answer never reaches the worker (its leases run out, and the
        sweeper takes them over)."""
        self._lease(max_jobs, lost)

    def _lease(self, max_jobs: int, lost: bool) -> list[tuple[str, str]]:
        reply = self.remote_api.post("/workers/lease", {
            "pool": POOL, "wait_seconds": 0, "max_jobs": max_jobs, "worker_id": WORKER})
        if reply.status >= 500:
            event("a remote lease failed")
            return []
        assert reply.status == 200, reply.body
        got = []
        for leased in reply.body["jobs"]:
            job = self.app.store.get(leased["job_id"])
            assert job.task == TASK and job.state is JobState.RUNNING, job
            assert leased["attempt"] == job.attempt <= job.max_attempts, (leased, job)
            owner = Token.decode(leased["lease"]["token"], job.job_id).owner
            assert job.lease_owner == owner, (job, owner)
            self.remote_owners.add(owner)
            got.append((job.job_id, leased["lease"]["token"]))
        if not lost:
            self.remote_leases += got
        event(f"remote lease: {min(len(got), 2)}+ jobs{' (answer lost)' if lost else ''}")
        return got

    @precondition(_remote)
    @rule(data=st.data(), action=st.sampled_from(ACTIONS),
          delivery=st.sampled_from(DELIVERIES))
    def remote_worker_reports(self, data: st.DataObject, action: str, delivery: str) -> None:
        job_id, token = data.draw(st.sampled_from(self.remote_leases))
        self._report(job_id, token, action, delivery)

    @precondition(_remote)
    @rule(data=st.data(), action=st.sampled_from(ACTIONS),
          delivery=st.sampled_from(DELIVERIES))
    def a_remote_lease_is_taken_over(self, data: st.DataObject, action: str,
                                     delivery: str) -> None:
        """The worker goes quiet past its lease; the sweeper takes the job over and it is
        leased again (or ends); the old worker then reports: a zombie."""
        job_id, token = data.draw(st.sampled_from(self.remote_leases))
        self.clock.advance(self.app.settings.lease_seconds
                           + self.app.settings.skew_grace_seconds + 1)
        try:
            sweeper.sweep(self.app)
        except self.failed:
            event("a sweep failed")
        self._lease(10, False)
        self._report(job_id, token, action, delivery)

    def _report(self, job_id: str, token: str, action: str, delivery: str) -> None:
        owner = Token.decode(token, job_id).owner
        before = self._row(job_id)
        holding = before["lease_owner"] == owner and before["state"] == JobState.RUNNING.value
        # Finished by this lease: the machine's own record, never the row's fields.
        finished = not holding and self.remote_finished.get(job_id) == token
        zombie = not holding and not finished
        lose = Fault(target="dynamodb.UpdateItem|dynamodb.TransactWriteItems",
                     kind="lose-raise", times=1)
        if delivery == "lost":
            self.injector.faults.append(lose)
        try:
            first = self._send(job_id, token, action)
        finally:
            if lose in self.injector.faults:
                self.injector.faults.remove(lose)  # the request wrote nothing
        answers = [first]
        if delivery == "lost" and first.status >= 500:
            answers.append(self._send(job_id, token, action))  # it never got an answer
        after = self._row(job_id)
        if zombie or finished:
            # Refused without a write, or (a finish of a finished lease) answered as it is.
            # A heartbeat after this lease's cancel (a heartbeat wrote it) says so again.
            repeat_ok = finished and (action != "heartbeat"
                                      or before["state"] == JobState.CANCELLED.value)
            for reply in answers:
                if repeat_ok and action == "heartbeat":
                    assert reply.status == 200 and reply.body["cancel_requested"], reply.body
                elif repeat_ok:
                    assert reply.status == 200, (reply.status, reply.body, before)
                    assert reply.body["state"] == before["state"], (reply.body, before)
                else:
                    assert reply.status == 409, (reply.status, reply.body, before)
                    assert reply.body["error"]["code"] == "lease_lost", reply.body
            assert self._fields(after) == self._fields(before), (action, before, after)
            event(f"remote {action} by a {'zombie' if zombie else 'finished lease'}: "
                  f"{answers[-1].status}")
            fire("a remote zombie's request changes nothing" if zombie else
                 "a remote lease's repeated finish answers as it was")
        elif answers[-1].status >= 500:
            event(f"remote {action} failed")  # the weather: the worker tries again later
            if after["state"] != before["state"]:
                # Its write landed though no answer said so (the machine is the only writer
                # between the two reads): this lease ended the attempt.
                self.remote_finished[job_id] = token
            return
        else:
            assert answers[-1].status == 200, (answers[-1].status, answers[-1].body, before)
            event(f"remote {action} ({delivery}) landed")
            if action != "heartbeat":
                assert after["state"] != JobState.RUNNING.value, after
                assert answers[-1].body["state"] == after["state"], (answers[-1].body, after)
            if action != "heartbeat" or JobState(after["state"]).terminal:
                # This lease's write ended the attempt: a finish (a retry queued, or the end),
                # or a heartbeat that met a cancel request and ended the job CANCELLED
                # (docs/protocol.md, "Cancellation").
                self.remote_finished[job_id] = token
            if delivery == "repeated":  # sent again: answered, nothing written twice
                again = self._send(job_id, token, action)
                if again.status < 500:
                    if action == "heartbeat" and after["state"] == JobState.CANCELLED.value:
                        assert again.status == 200 and again.body["cancel_requested"]
                    elif action == "heartbeat":
                        assert again.status == 200, again.body
                        after = {**after, "lease_expires_at": self._row(job_id)[
                            "lease_expires_at"]}
                    else:
                        assert again.status == 200, again.body
                        assert again.body["state"] == after["state"], (again.body, after)
                    assert self._fields(self._row(job_id)) == self._fields(after), action

    def _send(self, job_id: str, token: str, action: str) -> Reply:
        body: dict[str, Any] = {"token": token}
        if action == "complete":
            body["result"] = {"by": token[-6:]}
        elif action != "heartbeat":
            body["error"] = {"type": "RemoteError", "message": "planned"}
            body["retryable"] = action == "fail"
        path = "fail" if action.startswith("fail") else action
        return self.remote_api.post(f"/jobs/{job_id}/{path}", body)

    def _row(self, job_id: str) -> dict[str, Any]:
        job = self.app.store.get(job_id)
        return {"state": job.state.value, "epoch": job.epoch, "attempt": job.attempt,
                "lease_owner": job.lease_owner, "lease_expires_at": job.lease_expires_at,
                "result_json": job.result_json, "finished_at": job.finished_at}

    @staticmethod
    def _fields(row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row[f] for f in FIELDS)

    # -- the drain ------------------------------------------------------------------------

    def drain_round(self) -> None:
        """The remote worker leases what its pool holds and completes it (the weather is
        clear: every request lands)."""
        while hasattr(self, "remote_api") and (got := self._lease(10, False)):
            for job_id, token in got:
                reply = self._send(job_id, token, "complete")
                assert reply.status == 200, reply.body
                self.remote_finished[job_id] = token
        super().drain_round()  # type: ignore[misc]
