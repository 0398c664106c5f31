"""Tracing's cost per job (issue 35): time and AWS requests, off / no-op / SDK.

- Time: what tracing adds to one job, measured on its hooks alone (the submit stamp, the
  run span around an attempt with its end, one durable step's span), for a job submitted
  with a caller's ``traceparent`` (the costliest case: the context is parsed and stored).
  ``off``: the hooks are not installed (nothing runs); ``noop``: the OpenTelemetry API with
  no SDK (the default); ``sdk``: the SDK with a ``BatchSpanProcessor`` (its exporter
  discards, so the export's network cost is not counted: it runs on the processor's thread).
- Requests: AWS requests per job through the in-process API and worker over moto, per mode;
  they must be equal.

``python -m bench.tracing`` prints the figures as JSON (``make bench`` runs it).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from leasehold.core.jobs import Job, Transition
from leasehold.core.states import JobState
from leasehold.tracing import spans
from leasehold.tracing.carrier import incoming

CALLER = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
MODES = ("off", "noop", "sdk")


class Discard(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _job(job_id: str) -> Job:
    return Job(job_id=job_id, tenant="acme", task="echo", payload_json="{}", pool="default",
               priority="normal", state=JobState.QUEUED, epoch=1, max_attempts=3,
               created_at=1, run_at=1,
               history=(Transition(1, "", "QUEUED", "api", "submitted"),
                        Transition(5, "QUEUED", "RUNNING", "w", "leased")))


def hook_cost_us(mode: str, jobs: int) -> float:
    """Microseconds of tracing work per job in ``mode``."""
    if mode == "off":
        return 0.0
    provider = None
    if mode == "sdk":
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Discard()))
    spans.use_provider(provider)
    try:
        started = time.perf_counter()
        for n in range(jobs):
            job = _job(f"job-{n}")
            with incoming(CALLER):
                stored = spans.submit_stamp(None, job)  # type: ignore[arg-type]
            leased = Job(**{**job.__dict__, "extra": dict(stored), "attempt": 1})
            with spans.attempt_scope(None, leased, None) as end:  # type: ignore[arg-type]
                ctx = otel_context.get_current()
                with spans.step_scope(None, leased, "one"):  # type: ignore[arg-type]
                    pass
                assert ctx is not None
                end("succeeded", None)
        elapsed = time.perf_counter() - started
    finally:
        spans.use_provider(None)
        if provider is not None:
            provider.shutdown()
    return elapsed / jobs * 1e6


def requests_per_job(mode: str, jobs: int) -> dict[str, float]:
    """AWS requests per job (by operation) through the API and a worker, over moto."""
    from moto import mock_aws

    from leasehold.aws.counting import RequestCounter
    from leasehold.core.registry import TaskRegistry
    from leasehold.testing.local import LocalLeasehold

    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_REGION", "us-east-1")):
        os.environ.setdefault(name, value)
    registry = TaskRegistry()
    registry.task("echo")(lambda payload, ctx: ctx.step("one", lambda: payload))
    provider = None
    if mode == "sdk":
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Discard()))
    with mock_aws():
        local = LocalLeasehold(registry=registry)
        app = local.app
        if mode == "off":
            for hooks in (app.stamps, app.attempt_scopes, app.step_scopes, app.suspensions):
                hooks.clear()
            app.intakes[:] = [i for i in app.intakes if i is not spans.submit_intake]
        spans.use_provider(provider)
        try:
            counter = RequestCounter().attach(app.clients)
            for n in range(jobs):
                local.client.request("POST", "/jobs", {"task": "echo", "payload": n},
                                     headers=CALLER)
            local.run_jobs()
            counts = counter.snapshot().requests
        finally:
            spans.use_provider(None)
            local.close()
    return {op: round(count / jobs, 2) for op, count in sorted(counts.items())}


def run(jobs: int = 2000, request_jobs: int = 50) -> dict[str, Any]:
    out: dict[str, Any] = {"jobs": jobs, "request_jobs": request_jobs}
    for mode in MODES:
        hook_cost_us(mode, 200)  # warm up
        out[mode] = {"us_per_job": round(hook_cost_us(mode, jobs), 1),
                     "requests_per_job": requests_per_job(mode, request_jobs)}
    # The job's own requests; the poller's looks at its queues (GetQueueAttributes,
    # ReceiveMessage) follow the wall clock, not the jobs.
    out["requests_unchanged"] = len({json.dumps(_own(out[m]["requests_per_job"]))
                                     for m in MODES}) == 1
    return out


def _own(requests: dict[str, float]) -> dict[str, float]:
    polling = ("sqs.GetQueueAttributes", "sqs.ReceiveMessage", "sqs.GetQueueUrl")
    return {op: n for op, n in requests.items() if op not in polling}


if __name__ == "__main__":
    figures = run()
    print(json.dumps(figures, indent=2))
    with open(os.path.join(os.path.dirname(__file__), "tracing.json"), "w") as out:
        out.write(json.dumps(figures, indent=2) + "\n")
