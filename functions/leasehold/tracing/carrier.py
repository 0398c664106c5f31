"""The trace context a job carries on its row, and the context a request or message brings.

One row attribute, :data:`TRACE`, a map of W3C strings: ``tp`` (the ``traceparent`` of the
job's submit span, or of the caller's span when no SDK recorded one), ``ts`` (its
``tracestate``, when there is one) and ``link`` (the ``traceparent`` of the run span that
last suspended the job). Never in the SQS message: the row is read at every lease anyway.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

#: The row attribute that holds the job's trace context.
TRACE = "trace"

_W3C = TraceContextTextMapPropagator()


def encode(span_context: trace.SpanContext) -> dict[str, str]:
    """``{"tp": traceparent, "ts": tracestate}`` for a valid span context (``ts`` only
    when it has entries); empty for an invalid one."""
    if not span_context.is_valid:
        return {}
    carrier: dict[str, str] = {}
    _W3C.inject(carrier, trace.set_span_in_context(trace.NonRecordingSpan(span_context)))
    out = {"tp": carrier["traceparent"]}
    if carrier.get("tracestate"):
        out["ts"] = carrier["tracestate"]
    return out


def decode(traceparent: str | None, tracestate: str | None = None) -> trace.SpanContext | None:
    """The span context a ``traceparent`` (and ``tracestate``) names; None if malformed."""
    if not traceparent:
        return None
    carrier = {"traceparent": traceparent, **({"tracestate": tracestate} if tracestate else {})}
    span = trace.get_current_span(_W3C.extract(carrier, context=otel_context.Context()))
    context = span.get_span_context()
    return context if context.is_valid else None


def parent_of(extra: Mapping[str, Any]) -> trace.SpanContext | None:
    """The span a job's run spans are children of (its submit span), from its row."""
    stored = extra.get(TRACE)
    if not isinstance(stored, Mapping):
        return None
    return decode(_text(stored.get("tp")), _text(stored.get("ts")))


def suspended_by(extra: Mapping[str, Any]) -> trace.SpanContext | None:
    """The run span that last suspended the job, from its row."""
    stored = extra.get(TRACE)
    return decode(_text(stored.get("link"))) if isinstance(stored, Mapping) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@contextmanager
def incoming(headers: Mapping[str, Any] | None) -> Iterator[None]:
    """The trace context of a request's ``traceparent`` / ``tracestate`` headers (any case)
    made current for the block; nothing changes when it has none or a malformed one."""
    found = {str(k).lower(): v for k, v in (headers or {}).items()
             if str(k).lower() in ("traceparent", "tracestate") and isinstance(v, str)}
    if "traceparent" not in found:
        yield
        return
    token = otel_context.attach(_W3C.extract(found))
    try:
        yield
    finally:
        otel_context.detach(token)
