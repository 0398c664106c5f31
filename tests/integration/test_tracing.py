"""Traces (issue 35): the caller's trace continues into each job's submit, run and step
spans, through the API, the client and ctx.spawn, at no extra AWS request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, StatusCode

from leasehold.aws.counting import RequestCounter
from leasehold.core.context import JobContext
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import NotFound
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.testing.clock import FakeClock
from leasehold.time.ticker import fire_schedules
from leasehold.tracing.carrier import TRACE
from tests.integration.api_client import api_for
from tests.integration.helpers import deliver, submit_on_a_stale_admission_item
from tests.integration.test_client_operations import client_for
from tests.integration.tracing_helpers import (
    finished,
    ids,
    named,
    of_job,
    parent_id,
    recording,
)

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    with recording() as provider:
        yield provider


@pytest.fixture
def tasks(registry: TaskRegistry) -> TaskRegistry:
    registry.task("echo")(lambda payload, ctx: payload)
    fails: dict[str, int] = {}

    @registry.task("flaky", max_attempts=3,
                   retry=RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0))
    def flaky(payload: Any, ctx: JobContext) -> Any:
        if fails.setdefault(ctx.job_id, 0) < 1:
            fails[ctx.job_id] += 1
            raise RuntimeError("first try fails")
        return "ok"

    @registry.task("stepper")
    def stepper(payload: Any, ctx: JobContext) -> Any:
        first = ctx.step("first", lambda: 1)
        ctx.sleep(0.5)
        return first + ctx.step("second", lambda: 2)

    @registry.task("parent")
    def parent(payload: Any, ctx: JobContext) -> Any:
        child = ctx.spawn("echo", {"from": "parent"})
        return ctx.wait_for([child])[0]["result"]

    return registry


def test_a_request_with_a_traceparent_continues_into_the_submit_and_run_spans(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider) -> None:
    reply = api_for(app).post("/jobs", {"task": "echo", "payload": 1}, tenant="acme",
                              headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
    assert reply.status == 201, reply
    deliver(app)
    job_id = reply.body["job_id"]
    assert app.store.get(job_id).state is JobState.SUCCEEDED
    spans = of_job(finished(provider), job_id)
    [submitted] = named(spans, "leasehold submit echo")
    [run] = named(spans, "leasehold run echo")
    assert submitted.kind is SpanKind.PRODUCER and run.kind is SpanKind.CONSUMER
    assert ids(submitted)[0] == ids(run)[0] == int(CALLER_TRACE, 16)
    assert parent_id(submitted) == int(CALLER_SPAN, 16)
    assert parent_id(run) == ids(submitted)[1]
    attributes = dict(run.attributes or {})
    assert attributes["leasehold.attempt"] == 1 and attributes["leasehold.tenant"] == "acme"
    assert attributes["leasehold.pool"] == "default"
    assert attributes["leasehold.queue_wait_ms"] >= 0
    assert attributes["messaging.system"] == "aws_sqs"
    assert attributes["messaging.operation.type"] == "process"
    assert attributes["messaging.destination.name"]
    assert attributes["messaging.message.id"]
    assert run.status.status_code is not StatusCode.ERROR


def test_a_job_with_no_incoming_context_starts_its_own_trace(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider) -> None:
    first = submit(app, JobSpec(task="echo", tenant="acme")).job
    second = submit(app, JobSpec(task="echo", tenant="acme")).job
    deliver(app)
    spans = finished(provider)
    traces = [{ids(span)[0] for span in of_job(spans, job.job_id)} for job in (first, second)]
    assert all(len(trace) == 1 for trace in traces) and traces[0] != traces[1]
    [submitted] = named(of_job(spans, first.job_id), "leasehold submit")
    assert submitted.parent is None


def test_a_failed_attempt_is_an_error_span_and_the_retry_says_which_attempt_it_is(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider,
        clock: FakeClock) -> None:
    job = submit(app, JobSpec(task="flaky", tenant="acme")).job
    deliver(app)
    clock.advance(5)
    deliver(app)
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    spans = of_job(finished(provider), job.job_id)
    [submitted] = named(spans, "leasehold submit")
    runs = sorted(named(spans, "leasehold run"), key=lambda s: s.start_time or 0)
    assert [(r.attributes or {})["leasehold.attempt"] for r in runs] == [1, 2]
    assert all(parent_id(r) == ids(submitted)[1] for r in runs)
    assert runs[0].status.status_code is StatusCode.ERROR
    assert [e.name for e in runs[0].events] == ["exception"]
    assert (runs[0].events[0].attributes or {})["exception.message"] == "first try fails"
    assert (runs[1].attributes or {})["leasehold.retry"] is True
    assert runs[1].status.status_code is not StatusCode.ERROR


def test_steps_nest_in_their_run_and_the_attempt_after_a_sleep_links_to_the_one_that_slept(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider) -> None:
    job = submit(app, JobSpec(task="stepper", tenant="acme")).job
    deliver(app, once=True)
    assert app.store.get(job.job_id).state is JobState.SLEEPING
    deliver(app)
    assert app.store.get(job.job_id).result == 3
    spans = of_job(finished(provider), job.job_id)
    [submitted] = named(spans, "leasehold submit")
    slept, resumed = sorted(named(spans, "leasehold run"), key=lambda s: s.start_time or 0)
    assert parent_id(slept) == parent_id(resumed) == ids(submitted)[1]
    # A step runs once: "first" in the attempt that slept, "second" in the resumed one.
    [first] = named(spans, "leasehold step first")
    [second] = named(spans, "leasehold step second")
    assert parent_id(first) == ids(slept)[1] and parent_id(second) == ids(resumed)[1]
    assert [link.context.span_id for link in resumed.links] == [ids(slept)[1]]
    assert (slept.attributes or {})["leasehold.outcome"] == "sleeping"
    assert slept.status.status_code is not StatusCode.ERROR
    assert (resumed.attributes or {})["leasehold.resumed"] is True


def test_a_spawned_child_is_a_child_of_the_run_that_spawned_it(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider) -> None:
    parent = submit(app, JobSpec(task="parent", tenant="acme")).job
    for _ in range(4):
        deliver(app)
    assert app.store.get(parent.job_id).result == {"from": "parent"}
    spans = finished(provider)
    [child_submit] = named(spans, "leasehold submit echo")
    parent_runs = named(of_job(spans, parent.job_id), "leasehold run")
    assert parent_id(child_submit) == ids(parent_runs[0])[1]
    child_id = (child_submit.attributes or {})["leasehold.job_id"]
    [child_run] = named(of_job(spans, str(child_id)), "leasehold run")
    assert ids(child_run)[0] == ids(parent_runs[0])[0]


def test_a_span_open_around_client_submit_becomes_the_jobs_parent(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider) -> None:
    client = client_for(app, "acme")
    with provider.get_tracer("caller").start_as_current_span("checkout") as caller:
        handle = client.submit("echo", {"n": 1})
    deliver(app)
    spans = of_job(finished(provider), handle.job_id)
    [submitted] = named(spans, "leasehold submit")
    assert parent_id(submitted) == caller.get_span_context().span_id
    assert ids(submitted)[0] == caller.get_span_context().trace_id
    stored = app.store.get(handle.job_id).extra[TRACE]
    context = submitted.get_span_context()
    assert context is not None
    assert stored["tp"] == f"00-{context.trace_id:032x}-{context.span_id:016x}-" \
                           f"{int(context.trace_flags):02x}"


def test_tracing_adds_no_aws_request(
        make_app: Any, tasks: TaskRegistry, provider: TracerProvider) -> None:
    """Off (no hooks), on with the API's no-op, on with an SDK: the same requests."""
    from leasehold.tracing import spans as tracing_spans

    counts = {}
    for mode in ("off", "noop", "sdk"):
        app = make_app()
        if mode == "off":
            app.stamps.clear(), app.attempt_scopes.clear(), app.step_scopes.clear()
            app.suspensions.clear()
        tracing_spans.use_provider(provider if mode == "sdk" else None)
        counter = RequestCounter().attach(app.clients)
        api = api_for(app)
        headers = {"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}
        jobs = [api.post("/jobs", {"task": task}, tenant="acme", headers=headers).body["job_id"]
                for task in ("echo", "flaky", "stepper")]
        for _ in range(4):
            deliver(app)
            app.clock.advance(5)  # type: ignore[attr-defined]
        assert [app.store.get(j).state for j in jobs] == [JobState.SUCCEEDED] * 3
        counts[mode] = counter.snapshot().requests
    tracing_spans.use_provider(provider)
    assert counts["off"] == counts["noop"] == counts["sdk"], counts
    assert named(finished(provider), "leasehold run")  # the SDK did record spans


def test_a_workflows_steps_continue_the_trace_of_the_request_that_started_it(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider) -> None:
    api = api_for(app)
    reply = api.post("/workflows", {"steps": [{"id": "a", "task": "echo"},
                                              {"id": "b", "task": "echo", "depends_on": ["a"]}]},
                     headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
    assert reply.status in (200, 201), reply
    deliver(app)
    deliver(app)
    spans = finished(provider)
    runs = named(spans, "leasehold run echo")
    assert len(runs) == 2
    assert {ids(span)[0] for span in spans} == {int(CALLER_TRACE, 16)}
    submits = named(spans, "leasehold submit echo")
    assert {parent_id(span) for span in submits} == {int(CALLER_SPAN, 16)}
    assert {parent_id(run) for run in runs} == {ids(span)[1] for span in submits}


def test_each_occurrence_of_a_schedule_starts_a_trace_of_its_own(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider,
        clock: FakeClock) -> None:
    api = api_for(app)
    created = api.post("/schedules", {"cron": "* * * * *", "task": "echo"},
                       headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
    assert created.status == 201, created
    for _ in range(3):
        clock.advance(60)
        fire_schedules(app)
        deliver(app)
    spans = finished(provider)
    submits = named(spans, "leasehold submit echo")
    assert len(submits) >= 2
    assert all(span.parent is None for span in submits)  # not the creating request's
    traces = [ids(span)[0] for span in submits]
    assert len(set(traces)) == len(traces) and int(CALLER_TRACE, 16) not in traces
    for span in submits:
        job_id = str((span.attributes or {})["leasehold.job_id"])
        assert {ids(s)[0] for s in of_job(spans, job_id)} == {ids(span)[0]}


def test_a_batch_of_jobs_continues_the_trace_of_its_request(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider) -> None:
    reply = api_for(app).post("/jobs/batch", {"jobs": [{"task": "echo", "payload": n}
                                                      for n in range(3)]}, tenant="acme",
                              headers={"TraceParent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
    assert reply.status in (200, 201, 207), reply
    deliver(app)
    spans = finished(provider)
    submits = named(spans, "leasehold submit echo")
    assert len(submits) == 3 and len(named(spans, "leasehold run echo")) == 3
    assert {parent_id(span) for span in submits} == {int(CALLER_SPAN, 16)}
    assert {ids(span)[0] for span in spans} == {int(CALLER_TRACE, 16)}


def test_enqueue_item_keeps_the_current_span_as_the_jobs_parent_in_its_entry(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider) -> None:
    """The caller's transaction makes the job, so the caller's span is the job's parent:
    the row carries it, and the job's run span is its child in the caller's trace."""
    from leasehold.streams.enqueue import enqueue_item, hand_off

    with provider.get_tracer("caller").start_as_current_span("order") as caller:
        entries = enqueue_item(app, "echo", {"n": 1}, tenant="acme",
                               idempotency_key="order-1")
        app.clients.dynamodb.transact_write_items(TransactItems=entries)
    item = entries[0]["Put"]["Item"]
    tp = item[TRACE]["M"]["tp"]["S"]
    assert tp.split("-")[1] == f"{caller.get_span_context().trace_id:032x}"
    assert tp.split("-")[2] == f"{caller.get_span_context().span_id:016x}"
    assert hand_off(app, [{"eventName": "INSERT", "dynamodb": {"NewImage": item}}]) == 1
    deliver(app)
    [run] = named(finished(provider), "leasehold run echo")
    assert parent_id(run) == caller.get_span_context().span_id
    assert ids(run)[0] == caller.get_span_context().trace_id


def test_an_enqueued_job_whose_callers_transaction_is_refused_reports_no_submit_span(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider) -> None:
    """Issue 44: ``enqueue_item`` ended the job's submit span as it built the entries,
    before the caller's own transaction ran; a transaction its business condition refused
    left a reported submit span for a job that never existed."""
    from botocore.exceptions import ClientError

    from leasehold.streams.enqueue import enqueue_item

    orders = app.settings.jobs_table  # any table: the refusal is the caller's condition
    with provider.get_tracer("caller").start_as_current_span("order"):
        entries = enqueue_item(app, "echo", {"n": 1}, tenant="acme")
        refused = {"ConditionCheck": {"TableName": orders,
                                      "Key": {"job_id": {"S": "no-such-order"}},
                                      "ConditionExpression": "attribute_exists(job_id)"}}
        with pytest.raises(ClientError):
            app.clients.dynamodb.transact_write_items(TransactItems=[refused, *entries])
    job_id = entries[0]["Put"]["Item"]["job_id"]["S"]
    with pytest.raises(NotFound):
        app.store.get(job_id)
    assert [span for span in finished(provider)
            if (span.attributes or {}).get("leasehold.job_id") == job_id] == []


def test_a_malformed_traceparent_is_ignored_and_the_job_starts_its_own_trace(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider) -> None:
    reply = api_for(app).post("/jobs", {"task": "echo"}, tenant="acme",
                              headers={"traceparent": "00-not-a-trace-01"})
    assert reply.status == 201, reply
    [submitted] = named(finished(provider), "leasehold submit echo")
    assert submitted.parent is None


def test_an_admission_refused_and_retried_under_a_new_id_reports_one_submit_span(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider) -> None:
    """Issue 44: a capped tenant's admission item whose ``tat`` fell behind, unknown to this
    API instance (as after a restart), refuses the first transaction; admission catches it
    up and writes again, as a new row with a new id. The refused row was never a job: its
    submit span must not be reported (it was, ended before the write)."""
    made = submit_on_a_stale_admission_item(app)
    submits = named(finished(provider), "leasehold submit")
    assert [(span.attributes or {}).get("leasehold.job_id") for span in submits] == \
        [made.job.job_id]
    deliver(app)
    assert app.store.get(made.job.job_id).state is JobState.SUCCEEDED


def test_a_submission_refused_at_its_tenants_cap_reports_no_submit_span(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider) -> None:
    from leasehold.errors import RateLimited
    from leasehold.tenancy.admission import Limits, submit_admitted

    limits = Limits(max_live=1)
    first = submit_admitted(app, JobSpec(task="echo", tenant="acme"), "default", limits).job
    with pytest.raises(RateLimited):
        submit_admitted(app, JobSpec(task="echo", tenant="acme"), "default", limits)
    submits = named(finished(provider), "leasehold submit")
    assert [(span.attributes or {}).get("leasehold.job_id") for span in submits] == \
        [first.job_id]


def test_a_submission_whose_write_landed_but_failed_past_its_retries_is_an_unknown_error_span(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider) -> None:
    """The admission's transaction lands and its caller sees an error past botocore's
    retries: the caller cannot know whether the job was made (it was), so its span is
    reported as an ERROR marked ``leasehold.committed=unknown``, never as a plain success."""
    from leasehold.tenancy.admission import Limits, submit_admitted
    from tests.integration.helpers import lost_past_retries

    lost_past_retries(app, "dynamodb.TransactWriteItems")
    with pytest.raises(Exception):  # noqa: B017 - whatever botocore raised past its retries
        submit_admitted(app, JobSpec(task="echo", tenant="acme"), "default", Limits())
    [submitted] = named(finished(provider), "leasehold submit")
    assert submitted.status.status_code is StatusCode.ERROR
    assert (submitted.attributes or {}).get("leasehold.committed") == "unknown"


def test_an_admission_contended_on_one_item_and_made_on_another_reports_one_submit_span(
        app: Leasehold, tasks: TaskRegistry, provider: TracerProvider) -> None:
    """A transaction cancelled by conflicts past its tries wrote nothing, for certain: its
    row was never a job. Admission tries another of the tenant's items and makes the job
    there. Only that job's submit span is reported; the cancelled try's ended as an ERROR
    "outcome unknown" naming a job with no row (what the state machine's span check met
    after ``admit_through_conflicting_transactions``)."""
    from leasehold.aws.faults import Fault
    from leasehold.tenancy.admission import Limits, submit_admitted
    from tests.integration.helpers import inject

    inject(app, Fault(target="dynamodb.TransactWriteItems", kind="conflict", times=8))
    made = submit_admitted(app, JobSpec(task="echo", tenant="acme", idempotency_key="k1"),
                           "default", Limits(shards=4), buckets={})
    submits = named(finished(provider), "leasehold submit")
    assert [(span.attributes or {}).get("leasehold.job_id") for span in submits] == \
        [made.job.job_id]
    assert all(span.status.status_code is not StatusCode.ERROR for span in submits)
    assert app.store.get(made.job.job_id).job_id == made.job.job_id
