"""The spans of a job: submit (PRODUCER), run per attempt (CONSUMER), step per durable step.

Each function here is one of the lifecycle's hooks (``Leasehold.stamps``,
``attempt_scopes``, ``step_scopes``, ``suspensions``); none makes an AWS request: what a
span needs is on the job's row, which the lifecycle reads and writes anyway.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import ClientError
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from leasehold.aws.dynamo import Cancelled, contended
from leasehold.core import flowcontrol
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.core.suspension import Suspend
from leasehold.errors import LeaseholdError
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import Create, Submitted
from leasehold.streams.enqueue import BY_STREAM, HANDOFF
from leasehold.tracing.carrier import TRACE, encode, parent_of, suspended_by

#: The instrumentation scope every Leasehold span is reported under.
SCOPE = "leasehold"
#: Submit spans of keyed jobs waiting for their submission's answer, by job id; at most
#: :data:`MAX_PENDING` (rows made where no intake runs are ended when it is reached).
_pending: dict[str, trace.Span] = {}
_lock = threading.Lock()
MAX_PENDING = 10_000
#: Outcomes that end an attempt in failure (its span's status is ERROR).
FAILED = frozenset({"retrying", "dead"})


#: A tracer provider that replaces the global one (tests: an in-memory exporter, without
#: touching the process's global provider, which OpenTelemetry lets be set only once).
_provider: list[trace.TracerProvider] = []


def use_provider(provider: trace.TracerProvider | None) -> None:
    """Report Leasehold's spans to ``provider``; None: to the global provider again."""
    _provider[:] = [] if provider is None else [provider]


def tracer() -> trace.Tracer:
    # Looked up per use: an SDK installed after import (leasehold dev, a test) is used.
    return trace.get_tracer(SCOPE, tracer_provider=_provider[0] if _provider else None)


def submit_stamp(app: Leasehold, row: Job) -> Mapping[str, Any]:
    """The submit span of a job about to be written, child of the current span (the
    caller's), and its context as the row's :data:`TRACE` attribute. With no SDK and no
    incoming context nothing is stored; with no SDK the caller's own context is.

    The span is ended (reported) by :func:`submit_intake` once the row committed, never
    here: a row that is stamped is not yet a job. An admission refused by its tenant's item
    is retried under a new id (issue 44), and a span ended here reported a job that never
    existed. A workflow's step rows (WAITING) are written by its start, which runs no intake
    and finishes writing them all (or its reconciler does): their spans end at once.

    A row of :func:`~leasehold.streams.enqueue.enqueue_item` is committed (or not) by the
    caller's own transaction, which Leasehold never sees: no submit span of its own could
    say the job was made, so none is started, and the row carries the caller's span, the
    one whose transaction makes the job (issue 44: the span ended as the entries were
    built named a job whose transaction its business condition then refused)."""
    if row.extra.get(HANDOFF) == BY_STREAM:
        caller = encode(trace.get_current_span().get_span_context())
        return {TRACE: caller} if caller else {}
    span = tracer().start_span(
        f"leasehold submit {row.task}", kind=SpanKind.PRODUCER,
        attributes={"leasehold.job_id": row.job_id, "leasehold.task": row.task,
                    "leasehold.tenant": row.tenant, "leasehold.pool": row.pool,
                    "leasehold.priority": row.priority,
                    "messaging.system": "aws_sqs", "messaging.operation.type": "create"})
    if row.state is JobState.WAITING:
        span.end()
    else:
        with _lock:
            if len(_pending) >= MAX_PENDING:  # made by a path with no intake: end them
                for stale in _pending.values():
                    stale.end()
                _pending.clear()
            _pending[row.job_id] = span
    stored = encode(span.get_span_context())
    return {TRACE: stored} if stored else {}


def submit_intake(app: Leasehold, spec: Any, row: Job, writes: Sequence[Mapping[str, Any]],
                  create: Create) -> Submitted:
    """Ends the submit span of a job once the submission's answer is known: reported when
    it made the job; dropped (never ended, never exported) when nothing was written (a
    cancelled transaction, a refusal) or a replay found the job its first submission made;
    reported as an ERROR whose outcome is unknown when the write failed past its retries
    (its row may have landed: the span stays its parent)."""
    try:
        made = create(row, writes)
    except BaseException as exc:
        if _nothing_written(exc):
            _take(row.job_id)  # nothing was written under this id: no span
        elif (span := _take(row.job_id)) is not None:
            span.set_attribute("leasehold.committed", "unknown")
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, _describe(exc, "submit")))
            span.end()
        raise
    span = _take(row.job_id)
    if span is not None and made.created and made.job.job_id == row.job_id:
        span.end()
    return made


def _nothing_written(exc: BaseException) -> bool:
    """The write certainly did not apply: a failed condition, a refusal, or a write cancelled
    by conflicts with other transactions (admission then tries another of the tenant's
    items, and a span ended here as "outcome unknown" named a try that made nothing)."""
    return isinstance(exc, (Cancelled, LeaseholdError)) or (
        isinstance(exc, ClientError) and contended(exc))


def _take(job_id: str) -> trace.Span | None:
    with _lock:
        return _pending.pop(job_id, None)


def resumed(job: Job) -> bool:
    """Whether this lease resumes a suspended job: it slept since its previous attempt."""
    for change in reversed(job.history[:-1]):
        if JobState.SLEEPING.value in (change.source, change.target):
            return True
        if change.target == JobState.RUNNING.value:
            return False
    return False


def queue_wait_ms(job: Job) -> int | None:
    """From when the leased job was ready (queued, and due) to its lease."""
    if len(job.history) < 2:
        return None
    leased, ready = job.history[-1].at, max(job.history[-2].at, job.run_at or 0)
    return max(0, leased - ready)


def run_attributes(job: Job, queue_url: str | None, message_id: str | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "leasehold.job_id": job.job_id, "leasehold.task": job.task,
        "leasehold.attempt": job.attempt, "leasehold.max_attempts": job.max_attempts,
        "leasehold.retry": job.attempt > 1, "leasehold.tenant": job.tenant,
        "leasehold.pool": job.pool, "leasehold.priority": job.priority,
        "messaging.system": "aws_sqs", "messaging.operation.type": "process",
    }
    if (wait := queue_wait_ms(job)) is not None:
        attributes["leasehold.queue_wait_ms"] = wait
    shown = flowcontrol.shown(job.extra) or {}
    for kind in ("concurrency", "throttle"):
        if kind in shown:  # the flow-control key this lease waited on
            attributes[f"leasehold.{kind}_key"] = shown[kind]["key"]
    if queue_url:
        attributes["messaging.destination.name"] = queue_url.rstrip("/").rsplit("/", 1)[-1]
    if message_id:
        attributes["messaging.message.id"] = message_id
    return attributes


@contextmanager
def attempt_scope(app: Leasehold, job: Job, delivery: Any
                  ) -> Iterator[Callable[[str, BaseException | None], None]]:
    """One attempt's run span, current from the lease to the recorded outcome (and in the
    handler's thread); a child of the job's submit span, else the root of its own trace."""
    parent = parent_of(job.extra)
    context = trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent else \
        otel_context.Context()
    links = []
    if resumed(job) and (suspender := suspended_by(job.extra)) is not None:
        links.append(Link(suspender, {"leasehold.link": "suspended"}))
    attributes = run_attributes(job, getattr(delivery, "queue_url", None),
                                getattr(delivery, "message_id", None))
    attributes["leasehold.resumed"] = bool(links) or resumed(job)
    with tracer().start_as_current_span(
            f"leasehold run {job.task}", context=context, kind=SpanKind.CONSUMER,
            links=links, attributes=attributes) as span:

        def end(outcome: str, failure: BaseException | None) -> None:
            span.set_attribute("leasehold.outcome", outcome)
            if isinstance(failure, Suspend):
                return  # a sleep or a wait: not a failure
            if failure is not None:
                span.record_exception(failure)
            if outcome in FAILED:
                span.set_status(Status(StatusCode.ERROR, _describe(failure, outcome)))

        yield end


def _describe(failure: BaseException | None, outcome: str) -> str:
    if failure is None:
        return f"the attempt failed ({outcome})"
    return f"{type(failure).__name__}: {failure}"[:512]


@contextmanager
def step_scope(app: Leasehold, job: Job, name: str) -> Iterator[None]:
    """A durable step's span inside its run span (a raise records it, status ERROR)."""
    with tracer().start_as_current_span(
            f"leasehold step {name}",
            attributes={"leasehold.job_id": job.job_id, "leasehold.step": name,
                        "leasehold.attempt": job.attempt}):
        yield


def suspension(app: Leasehold, job: Job) -> Mapping[str, Any]:
    """What the suspending write adds: the current (run) span, which the resumed attempt's
    run span links to. Nothing when no span records (the no-op API) or the job has no trace."""
    stored = job.extra.get(TRACE)
    suspender = encode(trace.get_current_span().get_span_context())
    if not isinstance(stored, Mapping) or not suspender:
        return {}
    return {TRACE: {**stored, "link": suspender["tp"]}}
