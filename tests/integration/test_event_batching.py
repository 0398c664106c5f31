"""Job state events: which states the ``publish`` setting sends, sent in PutEvents batches of
up to 10 when a worker's batch ends (before its records are reported done), and what
throttled or refused PutEvents calls do: retried, then given up on, never failing a job.

Everything runs against moto's EventBridge: a rule on the bus routes every job event to an
SQS queue, which shows what was really published and how often. Faults are injected at the
botocore layer (the calls that get through really reach moto).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any
from unittest.mock import call, patch

import boto3
import pytest
from aws_lambda_powertools.metrics import MetricUnit

from leasehold.aws.faults import Fault, FaultInjector
from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.events import publishing as events
from leasehold.handlers import telemetry
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.control import cancel
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Worker
from leasehold.settings import Settings
from leasehold.time.ticker import tick
from tests.conftest import MakeApp
from tests.integration.helpers import deliver

BUS = "leasehold-batching"
#: How botocore names the operation in its events (the service id of EventBridge).
PUT_EVENTS = "eventbridge.PutEvents"


class Bus:
    """The app's bus in moto, a rule that copies every job event to a queue, and a record of
    every PutEvents call the app made (its entries) and of each SQS delete, in order."""

    def __init__(self, app: Leasehold) -> None:
        self.app = app
        self.sqs = boto3.client("sqs", region_name="us-east-1")
        self.url = self.sqs.create_queue(QueueName="job-events-" + BUS)["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=self.url, AttributeNames=["QueueArn"])[
            "Attributes"]["QueueArn"]
        client = app.clients.client("events")
        client.put_rule(Name="all-jobs", EventBusName=BUS,
                        EventPattern=json.dumps({"source": [events.SOURCE]}))
        client.put_targets(Rule="all-jobs", EventBusName=BUS, Targets=[{"Id": "q", "Arn": arn}])
        self.calls: list[tuple[str, int]] = []  # (operation, entries)
        client.meta.events.register("after-call.events.PutEvents", self._put)
        app.clients.sqs.meta.events.register("after-call.sqs.DeleteMessageBatch", self._delete)
        app.clients.sqs.meta.events.register("after-call.sqs.DeleteMessage", self._delete)

    def _put(self, http_response: Any, parsed: Any, model: Any, **_: Any) -> None:
        self.calls.append(("PutEvents", len(parsed.get("Entries", []))))

    def _delete(self, **_: Any) -> None:
        self.calls.append(("Delete", 0))

    def puts(self) -> list[int]:
        return [n for op, n in self.calls if op == "PutEvents"]

    def published(self) -> Counter[tuple[str, str]]:
        """(job id, detail-type) -> how many times it reached the bus."""
        seen: Counter[tuple[str, str]] = Counter()
        while messages := self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=10
                                                   ).get("Messages", []):
            for message in messages:
                body = json.loads(message["Body"])
                seen[(body["detail"]["job_id"], body["detail-type"])] += 1
                self.sqs.delete_message(QueueUrl=self.url,
                                        ReceiptHandle=message["ReceiptHandle"])
        return seen


def _app(make_app: MakeApp, registry: TaskRegistry, **overrides: Any) -> Leasehold:
    registry.task("echo")(lambda payload, ctx: payload)
    boto3.client("events", region_name="us-east-1").create_event_bus(Name=BUS)
    return make_app(**{"event_bus": BUS, **overrides})


def _submit(app: Leasehold, count: int) -> list[str]:
    return [submit(app, JobSpec(task="echo", payload=n)).job.job_id for n in range(count)]


def _consume_one_batch(app: Leasehold, worker: Worker | None = None) -> dict[str, int]:
    url = app.queues.url("default", "normal")
    batch = app.queues.receive(url, max_messages=10)
    return consume(worker or Worker(app), batch)


def test_the_default_publishes_terminal_states_only(
        make_app: MakeApp, registry: TaskRegistry, tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    app = _app(make_app, registry, event_bus=f"file:{log}")
    assert app.settings.publish == "terminal"
    done = submit(app, JobSpec(task="echo", payload=1)).job
    deliver(app)
    dropped = submit(app, JobSpec(task="echo", payload=2, delay_seconds=600)).job
    cancel(app, dropped.job_id, dropped.tenant)
    seen = [(e["detail"]["job_id"], e["detail-type"]) for e in events.tail(log)]
    assert seen == [(done.job_id, "Job Succeeded"), (dropped.job_id, "Job Cancelled")]


def test_off_publishes_nothing_to_eventbridge_and_everything_to_a_local_log(
        make_app: MakeApp, registry: TaskRegistry, tmp_path: Path) -> None:
    # EventBridge bills each event; a local log costs nothing, so it gets every change.
    assert Settings(publish="none").publish == "none"  # the old name of off, still valid
    Settings(publish="none").validate()
    eventbridge = _app(make_app, registry, publish="off")
    assert not any(isinstance(o, events.Publisher) for o in eventbridge.store.observers)
    log = tmp_path / "events.jsonl"
    app = make_app(event_bus=f"file:{log}", publish="off")
    _submit(app, 2)
    deliver(app)
    assert len(list(events.tail(log))) == 2 * 3  # queued, running, succeeded each


def test_a_worker_batch_sends_its_events_in_requests_of_ten_before_it_deletes_its_records(
        make_app: MakeApp, registry: TaskRegistry) -> None:
    app = _app(make_app, registry, publish="all")
    bus = Bus(app)
    jobs = _submit(app, 10)
    # A submission outside a batch (as through the API) publishes at once, one entry each.
    assert bus.puts() == [1] * 10
    bus.calls.clear()
    assert _consume_one_batch(app) == {"processed": 10, "failed": 0}
    # 10 jobs x (RUNNING, SUCCEEDED): two full requests, both before the records' delete.
    assert bus.calls == [("PutEvents", 10), ("PutEvents", 10), ("Delete", 0)]
    published = bus.published()
    assert published == Counter({(job, kind): 1 for job in jobs
                                 for kind in ("Job Queued", "Job Running", "Job Succeeded")})


def test_with_terminal_states_an_immediate_job_costs_one_entry_and_a_tenth_of_a_request(
        make_app: MakeApp, registry: TaskRegistry) -> None:
    app = _app(make_app, registry)
    bus = Bus(app)
    jobs = _submit(app, 10)
    assert bus.puts() == []  # QUEUED is not published
    _consume_one_batch(app)
    assert bus.calls == [("PutEvents", 10), ("Delete", 0)]
    assert bus.published() == Counter({(job, "Job Succeeded"): 1 for job in jobs})


@pytest.mark.parametrize("fault", [
    # botocore backs off and retries a throttled call itself.
    Fault(target=PUT_EVENTS, kind="throttle", times=2),
    # A call that failed past botocore's retries: the publisher sends its entries again.
    Fault(target=PUT_EVENTS, kind="fail", times=events.PUT_TRIES - 1),
], ids=["throttled", "failed"])
def test_a_refused_put_is_retried_and_each_event_is_published_once(
        make_app: MakeApp, registry: TaskRegistry, fault: Fault) -> None:
    app = _app(make_app, registry)
    bus = Bus(app)
    jobs = _submit(app, 10)
    injector = FaultInjector([fault], throttle_delay=0)
    injector.install(app.clients.client("events"))
    assert _consume_one_batch(app) == {"processed": 10, "failed": 0}
    assert injector.injected[(PUT_EVENTS, fault.kind)] == fault.times
    assert bus.published() == Counter({(job, "Job Succeeded"): 1 for job in jobs})


def test_entries_put_events_refuses_are_retried_alone(
        make_app: MakeApp, registry: TaskRegistry) -> None:
    app = _app(make_app, registry)
    bus = Bus(app)
    jobs = _submit(app, 10)
    refused: list[str] = []

    def spoil_the_third_entry_once(params: dict[str, Any], **_: Any) -> None:
        if not refused:  # moto refuses an entry without Detail: a real partial failure
            refused.append(json.loads(params["Entries"][2]["Detail"])["job_id"])
            params["Entries"][2]["Detail"] = ""

    app.clients.client("events").meta.events.register(
        "before-parameter-build.events.PutEvents", spoil_the_third_entry_once)
    _consume_one_batch(app)
    assert bus.puts() == [10, 1]  # 9 published by the first request, the refused one again
    assert bus.published() == Counter({(job, "Job Succeeded"): 1 for job in jobs})
    assert refused and refused[0] in jobs


def test_when_publishing_keeps_failing_the_jobs_still_succeed_and_run_once(
        make_app: MakeApp, registry: TaskRegistry, caplog: pytest.LogCaptureFixture) -> None:
    runs: Counter[int] = Counter()

    def count(payload: int, ctx: Any) -> int:
        runs[payload] += 1
        return payload

    app = _app(make_app, registry)
    registry.task("count")(count)
    bus = Bus(app)
    jobs = [submit(app, JobSpec(task="count", payload=n)).job.job_id for n in range(10)]
    injector = FaultInjector([Fault(target=PUT_EVENTS, kind="fail", times=None)])
    injector.install(app.clients.client("events"))
    worker = Worker(app)
    (publisher,) = [o for o in app.store.observers if isinstance(o, events.Publisher)]
    assert _consume_one_batch(app, worker) == {"processed": 10, "failed": 0}
    assert injector.injected[(PUT_EVENTS, "fail")] == events.PUT_TRIES
    assert publisher.unpublished == 10
    assert "10 job state event(s) not published" in caplog.text
    assert all(app.store.get(job).state is JobState.SUCCEEDED for job in jobs)
    assert deliver(app, worker) == 0  # deleted: nothing comes back to run again
    assert runs == Counter(range(10))
    assert bus.published() == Counter()


def test_events_of_a_batch_that_raised_are_still_sent(
        make_app: MakeApp, registry: TaskRegistry) -> None:
    app = _app(make_app, registry, publish="all")
    bus = Bus(app)
    (job,) = _submit(app, 1)
    bus.calls.clear()
    with pytest.raises(RuntimeError), app.batch():
        deliver_ = _consume_one_batch  # the batch nests inside an outer one
        deliver_(app)
        assert bus.puts() == []  # the inner batch did not send: the outer one will
        raise RuntimeError("after the job finished")
    assert bus.puts() == [2]
    assert bus.published()[(job, "Job Succeeded")] == 1


def test_a_ticker_pass_sends_its_promotions_together(
        make_app: MakeApp, registry: TaskRegistry, clock: FakeClock) -> None:
    app = _app(make_app, registry, publish="all")
    bus = Bus(app)
    jobs = [submit(app, JobSpec(task="echo", payload=n, delay_seconds=3600)).job.job_id
            for n in range(12)]
    assert bus.puts() == [1] * 12  # each SCHEDULED at its submission
    bus.calls.clear()
    clock.advance(3600)
    assert tick(app).promoted == 12
    assert bus.puts() == [10, 2]
    published = bus.published()
    assert all(published[(job, "Job Queued")] == 1 for job in jobs)


def test_the_lambda_handlers_count_the_events_given_up_on(
        make_app: MakeApp, registry: TaskRegistry) -> None:
    app = telemetry.install(_app(make_app, registry))
    (publisher,) = [o for o in app.store.observers if isinstance(o, events.Publisher)]
    FaultInjector([Fault(target=PUT_EVENTS, kind="fail", times=None)]).install(
        app.clients.client("events"))
    _submit(app, 3)
    with patch.object(telemetry.metrics, "add_metric") as add_metric:
        _consume_one_batch(app)
    assert publisher.unpublished == 3
    assert call(name="JobEventsUnpublished", unit=MetricUnit.Count, value=3) in \
        add_metric.call_args_list
