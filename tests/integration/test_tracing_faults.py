"""The span graph of many jobs under lost responses, throttles and crashed workers (issue 35):
exactly one trace per job (the caller's when it had one), every run span a child of the
job's submit span, steps inside their run, no orphan span.

``make test`` runs :data:`JOBS` jobs; ``make soak`` runs 1,000 (``LEASEHOLD_TRACE_JOBS``).
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from leasehold.aws.faults import Fault, FaultInjector, InjectedCrash
from leasehold.core.context import JobContext
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.testing.clock import FakeClock
from leasehold.tracing.carrier import TRACE, decode
from tests.integration.helpers import deliver
from tests.integration.tracing_helpers import finished, ids, parent_id, recording

JOBS = int(os.environ.get("LEASEHOLD_TRACE_JOBS", "30"))
WRITES = "dynamodb.PutItem|dynamodb.UpdateItem|dynamodb.TransactWriteItems"


def test_the_span_graph_of_many_jobs_survives_lost_responses_throttles_and_crashes(
        app: Leasehold, registry: TaskRegistry, clock: FakeClock) -> None:
    @registry.task("work", max_attempts=10,
                   retry=RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0))
    def work(payload: Any, ctx: JobContext) -> Any:
        value = ctx.step("prepare", lambda: payload["n"])
        if payload["n"] % 3 == 0 and ctx.attempt == 1:
            raise RuntimeError("the first attempt of every third job fails")
        return value

    with recording() as provider:
        caller = provider.get_tracer("caller")
        injector = FaultInjector([], seed=35, throttle_delay=0)
        injector.install(app.clients.dynamodb)
        injector.install(app.clients.sqs)
        callers: dict[str, int] = {}  # job id -> the caller's trace id
        submit_faults = [
            Fault(target=WRITES, kind="lose", rate=0.03, times=None),
            Fault(target="dynamodb.*", kind="throttle", rate=0.03, times=None),
            Fault(target="sqs.SendMessage", kind="lose", rate=0.03, times=None),
            Fault(target=WRITES, kind="lose-raise", rate=0.03, times=None),
        ]
        injector.faults[:] = submit_faults
        for n in range(JOBS):
            spec = JobSpec(task="work", tenant="acme", payload={"n": n},
                           idempotency_key=f"job-{n}")
            traced = n % 2 == 0
            span_cm = caller.start_as_current_span(f"caller {n}") if traced else \
                contextlib.nullcontext()
            with span_cm as span:
                for _ in range(5):  # the caller retries with its key what it saw fail
                    try:
                        job = submit(app, spec).job
                        break
                    except Exception:  # a lost response past the retries
                        continue
                else:
                    raise AssertionError("the submission never got through")
            if traced:
                callers[job.job_id] = span.get_span_context().trace_id
        # Workers: the same lost responses and throttles, and one write in fifty kills the
        # worker process (its message comes back; the sweeper takes the lease over).
        injector.faults[:] = [*submit_faults[:3],
                              Fault(target=WRITES, kind="crash", rate=0.02, times=None)]
        for _ in range(200):
            with contextlib.suppress(InjectedCrash):
                deliver(app)
            injector.revive()
            rows = app.store.batch_get(list(_job_ids(app, JOBS)))
            if all(row.state.terminal for row in rows):
                break
            clock.advance(app.settings.lease_seconds * 3)
            with contextlib.suppress(InjectedCrash):
                sweeper.sweep(app)
            injector.revive()
        injector.faults.clear()
        rows = app.store.batch_get(list(_job_ids(app, JOBS)))
        assert len(rows) == JOBS
        assert {row.state for row in rows} == {JobState.SUCCEEDED}
        kinds = {kind for _, kind in injector.injected}
        assert {"lose", "lose-raise", "throttle", "crash"} <= kinds, injector.injected
        spans = finished(provider)
    _assert_graph(spans, {row.job_id: row.extra[TRACE] for row in rows}, callers)


def _job_ids(app: Leasehold, count: int) -> list[str]:
    from leasehold.core.ids import derived_job_id
    return [derived_job_id("acme", "job", "acme", f"job-{n}") for n in range(count)]


def _assert_graph(spans: list[ReadableSpan], stored: dict[str, dict[str, str]],
                  callers: dict[str, int]) -> None:
    by_id = {ids(span)[1]: span for span in spans}
    orphans = [span.name for span in spans if span.parent is not None and
               parent_id(span) not in by_id]
    assert orphans == []
    per_job: dict[str, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        job_id = (span.attributes or {}).get("leasehold.job_id")
        if job_id is not None:
            per_job[str(job_id)].append(span)
    assert set(per_job) == set(stored)
    for job_id, job_spans in per_job.items():
        submitted = decode(stored[job_id]["tp"])
        assert submitted is not None
        # A submission that failed before its write reports an ERROR span (in the caller's
        # trace, or in one of its own when there was no caller): it made no job.
        job_spans = [span for span in job_spans if span.status.status_code is not
                     StatusCode.ERROR or not span.name.startswith("leasehold submit") or
                     ids(span)[1] == submitted.span_id]
        traces = {ids(span)[0] for span in job_spans}
        assert traces == {callers.get(job_id, submitted.trace_id)}, job_id
        runs = [s for s in job_spans if s.name.startswith("leasehold run")]
        assert runs, job_id
        assert {parent_id(run) for run in runs} == {submitted.span_id}, job_id
        assert submitted.span_id in by_id  # the stored submit span was reported
        for step in (s for s in job_spans if s.name.startswith("leasehold step")):
            run = by_id[parent_id(step)]  # type: ignore[index]
            assert run.name.startswith("leasehold run"), job_id
            assert (run.start_time or 0) <= (step.start_time or 0)
            assert (step.end_time or 0) <= (run.end_time or 0)
