"""The worker: lease a job, run its handler with heartbeats and a timeout, record the outcome.

One message is one attempt. The SQS message is acknowledged only once the outcome is written
to DynamoDB; a stale or duplicate message is acknowledged without running anything.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from leasehold.aws.dynamo import Cancelled
from leasehold.core.context import JobContext
from leasehold.core.effects import REJECTED, refused_entry, rejected
from leasehold.core.failures import deadline_exceeded, describe, error, unfit_result
from leasehold.core.jobs import Job, JobError
from leasehold.core.policy import decide_retry
from leasehold.core.schemas import task_input, task_output
from leasehold.core.spec import MAX_RESULT_BYTES, encode_json
from leasehold.core.states import JobState
from leasehold.core.suspension import Suspend
from leasehold.errors import (
    AttemptTimeout,
    LeaseholdError,
    LeaseLost,
    PayloadTooLarge,
    ValidationError,
)
from leasehold.lifecycle import handoff, tracebacks
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.deadline import Overdue, call_before
from leasehold.lifecycle.endings import bury, error_sets, retry_change
from leasehold.lifecycle.heartbeat import Attempt, Heartbeat
from leasehold.lifecycle.leasing import Delivery, Outcome, lease, unstartable, worker_identity
from leasehold.lifecycle.store import Change
from leasehold.lifecycle.submission import DEADLINE
from leasehold.lifecycle.suspending import suspend

log = logging.getLogger(__name__)

#: Tries to record an attempt's outcome through errors botocore gave up on.
FINISH_TRIES = 4


class Worker:
    def __init__(self, app: Leasehold, *, worker_id: str | None = None,
                 finish_marks: Mapping[str, Any] | None = None) -> None:
        self.app = app
        self.worker_id = worker_id or worker_identity()
        #: Attributes every write that ends an attempt also sets (on the same write): a
        #: remote worker's finish records which lease wrote it (``leasehold.remote``).
        self.finish_marks: Mapping[str, Any] = dict(finish_marks or {})
        #: The jobs this worker is running now, each from its lease to its outcome (a batch's
        #: finished jobs are not kept until its slowest one ends): the registry shows these.
        self.running: set[str] = set()

    # -- one message --------------------------------------------------------------------

    def process(self, delivery: Delivery) -> Outcome:
        """Handle one message. Raises only for infrastructure errors (the message is retried)."""
        leased = self._lease(delivery)
        if isinstance(leased, Outcome):
            return leased
        job, owner, now = leased
        with ExitStack() as scopes:  # features around the attempt (tracing's run span)
            ends = [scopes.enter_context(scope(self.app, job, delivery))
                    for scope in self.app.attempt_scopes]
            outcome, failure = self._attempt(job, owner, delivery, now)
            for end in ends:
                end(outcome.value, failure)
        return outcome

    def take(self, delivery: Delivery) -> tuple[Job, str] | Outcome:
        """Lease the message's job for this worker: (the job as leased, the lease's owner),
        or the outcome of a message that starts nothing (stale, gated, cancelled before it
        started, past its deadline). The one lease every worker takes, in-process or over
        HTTP (``leasehold.remote``): flow control's gate is taken with it."""
        leased = self._lease(delivery)
        if isinstance(leased, Outcome):
            return leased
        job, owner, now = leased
        unstarted = self._before_start(job, owner, now)
        return unstarted if unstarted is not None else (job, owner)

    def _lease(self, delivery: Delivery) -> tuple[Job, str, int] | Outcome:
        return lease(self.app, self.worker_id, delivery)

    def _before_start(self, job: Job, owner: str, now: int) -> Outcome | None:
        """The outcome of a leased job that must not start (:func:`unstartable`: cancelled
        before its lease, past its deadline, its lease run out), or None to run it."""
        why = unstartable(self.app, job, now)
        if why is Outcome.CANCELLED:
            return self._cancel(job, owner, now)
        if isinstance(why, JobError):
            return self._fail(job, owner, now, why)
        return why

    def _attempt(self, job: Job, owner: str, delivery: Delivery,
                 now: int) -> tuple[Outcome, BaseException | None]:
        """Run a leased job and record its outcome: (the outcome, the handler's exception)."""
        unstarted = self._before_start(job, owner, now)
        if unstarted is not None:
            return unstarted, None
        self.running.add(job.job_id)
        try:
            attempt = self._run(job, owner, delivery)
            outcome = Outcome.LEASE_LOST if attempt.lease_lost else \
                self._settle(job, owner, attempt)
        finally:
            self.running.discard(job.job_id)
        log.info("job %s attempt %d: %s", job.job_id, job.attempt, outcome.value,
                 extra={"job_id": job.job_id, "tenant": job.tenant, "task": job.task,
                        "attempt": job.attempt, "outcome": outcome.value})
        failure = attempt.failure
        if failure is None and attempt.timed_out:
            failure = AttemptTimeout(f"attempt {job.attempt} ran past its timeout")
        return outcome, failure

    # -- running ------------------------------------------------------------------------

    def _run(self, job: Job, owner: str, delivery: Delivery) -> Attempt:
        app = self.app
        state = Attempt(lease_ends=job.lease_expires_at or app.now())
        timeout = job.timeout_seconds
        # The attempt ends at its timeout or at the job's deadline, whichever comes first.
        ends = app.now() + int(timeout * 1000)
        cut = int(job.extra.get(DEADLINE) or ends)
        cut_short = cut < ends
        ctx = JobContext(
            job_id=job.job_id, task=job.task, tenant=job.tenant, attempt=job.attempt,
            max_attempts=job.max_attempts, fencing_token=job.epoch,
            idempotency_key=job.idempotency_key or job.job_id,
            deadline_ms=min(cut, ends), labels=job.labels,
            extra=job.extra,
        )

        state.effects = ctx._effects  # ctx.transact's entries join the success transition
        heartbeat = Heartbeat(app, job, owner, ctx, state, self._keep_invisible(delivery))
        interval = heartbeat.interval
        ctx._heartbeat = heartbeat
        for hook in app.attempt_hooks:
            hook(ctx, job, owner)
        for equip in app.contexts:
            equip(app, ctx)
        try:
            definition = app.registry.get(job.task)
        except ValidationError as exc:
            state.failure = exc
            state.finished = True
            return state

        def target() -> None:
            try:
                # A typed task gets its model instance, built from the stored payload by
                # the model deployed now, and its result is checked at the finish: each
                # failure is non-retryable (InvalidPayload, InvalidResult) and names the field.
                result = definition.fn(task_input(definition.input, job.payload), ctx)
                ctx._returned()
                state.result = task_output(definition.output, result)
            except BaseException as exc:
                state.failure = exc
            finally:
                state.finished = True

        # In a copy of this thread's context: what an attempt scope made current (a run
        # span) is current in the handler, so its own spans and instrumented calls nest.
        runner = threading.Thread(target=contextvars.copy_context().run, args=(target,),
                                  name=f"job-{job.job_id}", daemon=True)
        started = time.monotonic()
        runner.start()
        while True:
            remaining = timeout - (time.monotonic() - started)
            # After a failed heartbeat, try again well within what is left of the lease;
            # never sleep past the lease's end by our clock.
            wait = interval if not state.failed_beats else min(interval / 2, 1.0)
            lease_left = (state.lease_ends - app.now()) / 1000
            # The job's deadline is a time on the app's clock (like the lease's end).
            deadline_left = (ctx.deadline_ms - app.now()) / 1000 if cut_short else wait
            runner.join(max(0.0, min(wait, remaining, lease_left, deadline_left)))
            if not runner.is_alive():
                break
            if time.monotonic() - started >= timeout:
                # Python cannot kill a thread: signal it and abandon it; the attempt is over.
                ctx.cancel("attempt timed out")
                state.timed_out = True
                break
            if cut_short and app.now() >= ctx.deadline_ms:
                ctx.cancel("the job's deadline passed")  # ends DEAD, as a lease past it
                state.timed_out = state.past_deadline = True
                break
            heartbeat()
            if state.lease_lost:
                runner.join(min(interval, 1.0))  # let a cooperative handler stop
                break
        view_job = heartbeat.view
        if view_job.cancel_requested and not ctx.cancelled:
            ctx.cancel("cancel requested")
        state.view = view_job
        return state

    def _keep_invisible(self, delivery: Delivery) -> Callable[[], None] | None:
        """What keeps the message hidden while its job runs (None: not from a queue)."""
        url, handle = delivery.queue_url, delivery.receipt_handle
        if not (url and handle):
            return None
        if delivery.keep_invisible is not None:
            return delivery.keep_invisible
        seconds = int(self.app.settings.lease_seconds * 2)
        return lambda: self.app.queues.extend(url, handle, seconds)

    # -- finishing ----------------------------------------------------------------------

    def _settle(self, job: Job, owner: str, attempt: Attempt) -> Outcome:
        """Record the outcome, waiting for it only until the lease's end by our clock.

        A write hung on its socket would hold the worker for botocore's timeouts times its
        retries, times :data:`FINISH_TRIES`. Past the lease the job is the sweeper's: the
        abandoned write is fenced (owner, epoch), so if it ever lands it lands only while
        nobody else has the job, and its observers still hear of it.
        """
        try:
            return call_before(self.app.clock, attempt.lease_ends,
                               lambda: self._record(job, owner, attempt),
                               name=f"outcome-{job.job_id}")
        except Overdue:
            log.warning("the lease of %s ran out by this worker's clock before its outcome "
                        "was recorded: the sweeper takes the job over", job.job_id)
            return Outcome.LEASE_LOST

    def record(self, job: Job, owner: str, attempt: Attempt) -> Outcome:
        """Record an attempt that ran elsewhere (a remote worker's report): as
        :meth:`_record`, with the same fencing, retries, cancellation and burial."""
        return self._record(job, owner, attempt)

    def _record(self, job: Job, owner: str, attempt: Attempt) -> Outcome:
        """Write the outcome, trying again through errors other than a lost lease.

        The attempt's work is done: giving up here would leave the job RUNNING until its
        lease expires and the sweeper runs it again. Every try writes the same change at the
        same ``now``, so a try whose response was lost is recognised by the next one.
        """
        now = self.app.now()
        # A fenced cell records nothing: the job stays RUNNING until its lease runs out,
        # and the sweeper of this cell, once it holds its Region lease again, runs it.
        self.app.guard_work(now)
        for tries in range(1, FINISH_TRIES + 1):
            try:
                return self._finish(job, owner, attempt, now)
            except LeaseLost:
                return Outcome.LEASE_LOST
            except (ClientError, BotoCoreError):
                if tries == FINISH_TRIES:
                    raise
                log.warning("recording the outcome of %s failed (try %d); trying again",
                            job.job_id, tries, exc_info=True)
                self.app.clock.sleep(0.1 * 2 ** tries)
        raise AssertionError("unreachable")

    def _finish(self, job: Job, owner: str, attempt: Attempt, now: int) -> Outcome:
        view = attempt.view or job
        if attempt.past_deadline:
            failure: JobError | None = deadline_exceeded(
                f"attempt {job.attempt} ran until the job's deadline")
        elif attempt.timed_out:
            failure = error(
                AttemptTimeout.__name__,
                f"attempt {job.attempt} ran past its timeout of {job.timeout_seconds:g}s")
        elif attempt.error is not None:
            failure = attempt.error
        elif attempt.failure is not None:
            failure = describe(attempt.failure)
        else:
            failure = None
        if view.cancel_requested:
            return self._cancel(view, owner, now)
        if isinstance(attempt.failure, Suspend) and not attempt.timed_out:
            try:
                suspend(self.app, view, owner, attempt.failure.sleep, now, actor=self.worker_id)
            except LeaseLost as exc:
                return self._cancelled_meanwhile(exc, view, owner, now)
            return Outcome.SLEEPING
        if failure is None:
            try:
                result_json = encode_json("result", attempt.result, MAX_RESULT_BYTES)
            except (PayloadTooLarge, ValidationError) as exc:
                failure = unfit_result(exc)
            else:
                return self._succeed(view, owner, now, result_json, attempt.effects)
        return self._fail(view, owner, now, failure)

    def _succeed(self, job: Job, owner: str, now: int, result_json: str,
                 effects: Sequence[Mapping[str, Any]] = ()) -> Outcome:
        change = Change(
            target=JobState.SUCCEEDED, actor=self.worker_id, reason="ok", owner=owner,
            unless_cancel_requested=True,
            set={"result": result_json, "finished_at": now, **self.finish_marks},
            remove=("error",),
            also=tuple(effects),
        )
        try:
            self.app.store.transition(job, change, now=now, conflict=LeaseLost)
        except LeaseLost as exc:
            return self._cancelled_meanwhile(exc, job, owner, now)
        except Cancelled as cancelled:
            # An effect's own condition failed (the row's held: it is ours): nothing was
            # written, and the attempt fails as if its handler had raised, at once.
            refused = refused_entry(effects, cancelled.codes, cancelled.messages, first=1,
                                    where="the job's success")
            if refused is None:
                raise
            return self._fail(job, owner, now, describe(refused))
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if not effects or code not in REJECTED:
                raise
            return self._fail(job, owner, now, describe(rejected(
                code, str(exc.response.get("Error", {}).get("Message", "")),
                where="the job's success")))
        return Outcome.SUCCEEDED

    def _cancelled_meanwhile(self, exc: LeaseLost, job: Job, owner: str, now: int) -> Outcome:
        """Our finish was refused: a cancel requested after our last heartbeat wins over it
        (success, retry or burial alike); anything else means the lease was lost."""
        current = exc.context.get("current")
        if not isinstance(current, Job) or current.epoch != job.epoch:
            raise exc
        if current.state is JobState.CANCELLED:
            return Outcome.CANCELLED  # the sweeper honoured the cancel while we ran on
        if current.state is JobState.RUNNING and current.cancel_requested and \
                current.lease_owner == owner:
            return self._cancel(current, owner, now)
        raise exc

    def _cancel(self, job: Job, owner: str, now: int) -> Outcome:
        change = Change(target=JobState.CANCELLED, actor=self.worker_id,
                        reason="cancel requested", owner=owner,
                        set={"finished_at": now, **self.finish_marks})
        self.app.store.transition(job, change, now=now, conflict=LeaseLost)
        return Outcome.CANCELLED

    def _fail(self, job: Job, owner: str, now: int, failure: JobError) -> Outcome:
        app = self.app
        decision = decide_retry(
            job.retry, attempt=job.attempt, max_attempts=job.max_attempts,
            first_attempt_at_ms=job.first_started_at or now, now_ms=now,
            error_types=failure.types or (failure.type,), rng=app.rng,
            not_before_ms=failure.retry_at_ms,
        )
        # An excerpt on the row (under 1 KB through its retries); the whole of it kept
        # first in an item of its own, which the job view reads.
        error_item = tracebacks.row_error(app, job, failure)
        if not decision.retry:
            change = Change(target=JobState.DEAD, actor=self.worker_id, reason=decision.reason,
                            owner=owner, unless_cancel_requested=True,
                            set={**error_sets(job, error_item), "finished_at": now,
                                 **self.finish_marks})
            try:
                dead = app.store.transition(job, change, now=now, conflict=LeaseLost)
            except LeaseLost as exc:
                return self._cancelled_meanwhile(exc, job, owner, now)
            bury(app, dead, decision.reason)
            return Outcome.DEAD
        run_at = now + round(decision.delay_seconds * 1000)  # a Retry-After's time, exactly
        retry = retry_change(app, job, run_at, now, self.worker_id, owner=owner,
                             error_item=error_item, reason=decision.reason)
        if self.finish_marks:
            retry = replace(retry, set={**retry.set, **self.finish_marks})
        try:
            new = app.store.transition(job, retry, now=now, conflict=LeaseLost)
        except LeaseLost as exc:
            return self._cancelled_meanwhile(exc, job, owner, now)
        handoff.send(app.queues, new, now)
        return Outcome.RETRYING


__all__ = ["Delivery", "LeaseholdError", "Outcome", "Worker", "bury", "error_sets",
           "retry_change", "worker_identity"]
