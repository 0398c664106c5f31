"""An in-memory span exporter for the tracing tests, and the span graph's checks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from leasehold.tracing.spans import use_provider


@contextmanager
def recording() -> Iterator[TracerProvider]:
    """Leasehold's spans (and the test's own) go to an in-memory exporter for this test."""
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.exporter = exporter  # type: ignore[attr-defined]
    use_provider(provider)
    try:
        yield provider
    finally:
        use_provider(None)
        provider.shutdown()


def finished(provider: TracerProvider) -> list[ReadableSpan]:
    return list(provider.exporter.get_finished_spans())  # type: ignore[attr-defined]


def named(spans: Sequence[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name.startswith(prefix)]


def of_job(spans: Sequence[ReadableSpan], job_id: str) -> list[ReadableSpan]:
    return [span for span in spans if (span.attributes or {}).get("leasehold.job_id") == job_id]


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def ids(span: ReadableSpan) -> tuple[int, int]:
    context = span.get_span_context()
    assert context is not None
    return context.trace_id, context.span_id


def traceparent(span: trace.Span) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-01"
