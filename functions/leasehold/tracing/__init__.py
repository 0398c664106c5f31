"""Traces: one OpenTelemetry trace per job, from the caller's request to every attempt.

The W3C trace context a job continues is taken wherever a job is made (``new_job``'s
stamp: the API request's ``traceparent`` header, the Python client's current context sent
as that header, ``enqueue_item``, a workflow's start, ``ctx.spawn``'s running attempt; a
schedule's or trigger's occurrence has none and starts its own trace) and kept on the
job's row in one small attribute (:data:`~leasehold.tracing.carrier.TRACE`), written by the
writes the job makes anyway: tracing costs no AWS request. The spans:

- ``leasehold submit {task}`` (PRODUCER), child of the caller's span;
- ``leasehold run {task}`` (CONSUMER), one per attempt, child of the submit span, and the
  current span of the task code; an attempt that resumes a suspended job links to the run
  that suspended;
- ``leasehold step {name}``, each durable step that runs, inside its run span.

Only the OpenTelemetry API is imported: with no SDK configured every span is the API's
no-op. :mod:`leasehold.tracing.setup` configures the SDK (the ``otel`` extra) from the
standard ``OTEL_*`` environment variables.
"""

from __future__ import annotations

from leasehold.lifecycle.app import Leasehold
from leasehold.tracing.spans import (
    attempt_scope,
    step_scope,
    submit_intake,
    submit_stamp,
    suspension,
)

__all__ = ["install"]


def install(app: Leasehold) -> None:
    """Trace every job ``app`` makes and runs (idempotent)."""
    if submit_stamp in app.stamps:
        return
    app.stamps.append(submit_stamp)
    app.intakes.insert(0, submit_intake)  # first: it sees every intake's answer
    app.attempt_scopes.append(attempt_scope)
    app.step_scopes.append(step_scope)
    app.suspensions.append(suspension)
