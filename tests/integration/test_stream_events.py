"""Events follow committed changes: a worker killed after its batch's transitions commit and
before the batch's PutEvents must not lose those events for good (issue 24).

The kill is an injected ``crash`` on PutEvents (the process dies just before the call, after
every transition of the batch committed). Redelivery and a sweep then find nothing to do:
the jobs are SUCCEEDED, so nothing re-publishes them unless events come from the committed
rows themselves: the change-stream relay. moto serves ``dynamodbstreams`` only as a server,
so DynamoDB here is the embedded emulator's (SQS and EventBridge stay in-process moto).
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from pathlib import Path

import pytest

from leasehold.aws.faults import Fault, FaultInjector, InjectedCrash
from leasehold.clock import FakeClock, iso
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.events.publishing import FileSink, sink_for, tail
from leasehold.handlers import telemetry
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.streams.poller import Checkpoint, poll, stream_arn
from leasehold.streams.relay import event_id
from tests.conftest import MakeApp
from tests.integration.helpers import deliver, submit_on_a_stale_admission_item
from tests.integration.test_event_batching import Bus, _app, _consume_one_batch, _submit
from tests.integration.test_handlers import LambdaContext

AFTER_COMMIT = "eventbridge.PutEvents|sqs.DeleteMessageBatch|sqs.DeleteMessage"


@pytest.fixture
def stream_app(endpoint: str, monkeypatch: pytest.MonkeyPatch, make_app: MakeApp,
               registry: TaskRegistry) -> Leasehold:
    for service in ("DYNAMODB", "DYNAMODB_STREAMS", "DYNAMODBSTREAMS"):
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service}", endpoint)
    return _app(make_app, registry, events_from="stream")


def test_a_worker_killed_before_its_batch_publishes_loses_no_event(
        stream_app: Leasehold, clock: FakeClock, tmp_path: Path) -> None:
    app = stream_app
    bus = Bus(app)
    jobs = _submit(app, 10)
    # The worker dies at its first call after the batch's transitions commit: its PutEvents
    # when it publishes inline (the old way), else the delete of its records.
    injector = FaultInjector([Fault(target=AFTER_COMMIT, kind="crash")])
    injector.install(app.clients.client("events"))
    injector.install(app.clients.sqs)
    with contextlib.suppress(InjectedCrash):
        _consume_one_batch(app)
    assert injector.dead
    assert all(app.store.get(job).state is JobState.SUCCEEDED for job in jobs)
    injector.revive()  # new processes: redelivery, a sweep and the relay, as in production
    clock.advance(app.settings.lease_seconds + 120)
    deliver(app)
    sweeper.sweep(app)
    deliver(app)
    poll(app, sink_for(app), Checkpoint(tmp_path / "relay.json"))  # type: ignore[arg-type]
    assert all(app.store.get(job).state is JobState.SUCCEEDED for job in jobs)
    assert bus.published() == Counter({(job, "Job Succeeded"): 1 for job in jobs})


def test_a_relay_killed_mid_batch_resumes_from_its_checkpoint(
        stream_app: Leasehold, tmp_path: Path) -> None:
    app = stream_app
    bus = Bus(app)
    first = _submit(app, 3)
    deliver(app)
    checkpoint = Checkpoint(tmp_path / "relay.json")
    assert poll(app, sink_for(app), checkpoint) > 0  # type: ignore[arg-type]
    second = _submit(app, 3)
    deliver(app)
    injector = FaultInjector([Fault(target="eventbridge.PutEvents", kind="crash")])
    injector.install(app.clients.client("events"))
    with contextlib.suppress(InjectedCrash):
        poll(app, sink_for(app), checkpoint)  # type: ignore[arg-type]
    assert injector.dead
    injector.revive()
    poll(app, sink_for(app), checkpoint)  # type: ignore[arg-type]
    assert bus.published() == Counter({(job, "Job Succeeded"): 1 for job in first + second})


def test_the_lambda_handler_publishes_a_stream_batch_with_stable_event_ids(
        stream_app: Leasehold, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from leasehold.handlers import relay as handler

    app = stream_app
    log = tmp_path / "events.jsonl"
    # As deployed: the stack sets the namespace, and the cold start installs the telemetry
    # (Powertools refuses to flush metrics without a namespace).
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Leasehold")
    installed = functools.cache(lambda: telemetry.install(app))
    monkeypatch.setattr(handler, "_app", installed)
    monkeypatch.setattr(handler, "_sink", lambda: FileSink(log))
    jobs = _submit(app, 2)
    deliver(app)
    streams = app.clients.client("dynamodbstreams")
    arn = stream_arn(app)
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                          ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    event = {"Records": streams.get_records(ShardIterator=iterator)["Records"]}
    assert handler.handler(event, LambdaContext()) == {"batchItemFailures": []}
    assert handler.handler(event, LambdaContext()) == {"batchItemFailures": []}  # redelivered
    ids = [e["detail"]["event_id"] for e in tail(log)]
    # Terminal states only (the default); the redelivery repeats the same ids.
    assert sorted(set(ids)) == sorted(event_id(app.store.get(job)) for job in jobs)
    assert len(ids) == 4


def test_an_event_is_timed_by_its_change_not_by_the_relay(
        stream_app: Leasehold, clock: FakeClock, tmp_path: Path) -> None:
    app = stream_app
    log = tmp_path / "events.jsonl"
    [job] = _submit(app, 1)
    deliver(app)
    finished = app.store.get(job).finished_at
    assert finished is not None
    clock.advance(120)  # the relay reads the change two minutes later
    poll(app, FileSink(log), Checkpoint(tmp_path / "relay.json"))
    [event] = [e for e in tail(log) if e["detail"]["job_id"] == job]
    assert event["time"] == iso(finished)


def test_an_admission_refused_and_retried_under_a_new_id_is_one_job_queued_event(
        endpoint: str, monkeypatch: pytest.MonkeyPatch, make_app: MakeApp,
        registry: TaskRegistry, tmp_path: Path) -> None:
    """Issue 44: a capped tenant's admission item whose ``tat`` fell behind, unknown to this
    API instance (as after ``leasehold dev`` restarts on its saved state), refuses the first
    transaction; admission catches the item up and writes a new row under a new id. The
    embedded emulator put the refused row back but kept its stream record, so the relay
    published ``Job Queued`` for a job that never existed (its id answered 404), beside the
    real one's."""
    import json

    for service in ("DYNAMODB", "DYNAMODB_STREAMS", "DYNAMODBSTREAMS"):
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service}", endpoint)
    app = _app(make_app, registry, events_from="stream", publish="all")
    made = submit_on_a_stale_admission_item(app)
    log = tmp_path / "events.jsonl"
    poll(app, FileSink(log), Checkpoint(tmp_path / "relay.json"))
    queued = [event["detail"]["job_id"] for event in map(json.loads, log.read_text().splitlines())
              if event["detail-type"] == "Job Queued"]
    assert queued == [made.job.job_id]  # one event, and it names the job that exists
    assert app.store.get(made.job.job_id).state is JobState.QUEUED
