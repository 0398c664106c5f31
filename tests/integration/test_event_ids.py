"""One event id per committed change of a job row, the same from the process that made the
change (inline publishing) and from the change-stream relay, and the same however often
either sends it (issue 29, defect 11).

Each test runs one app with both publishers: the inline one (the library's default,
installed here as an observer) writes ``inline.jsonl``, the relay reads the table's stream
into ``relay.jsonl``. moto serves ``dynamodbstreams`` only as a server, so DynamoDB is the
embedded emulator's (SQS and EventBridge stay in-process moto). Faults are injected at the
botocore layer.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import boto3
import pytest

from leasehold.aws.faults import Fault, FaultInjector, InjectedCrash
from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import NonRetryableError
from leasehold.events import publishing
from leasehold.events.publishing import EventBridgeSink, FileSink, tail
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.streams.poller import Checkpoint, poll
from leasehold.streams.relay import CHANGES, event_id
from leasehold.workflows import parse_workflow, start_workflow
from leasehold.workflows.progress import step_job_id
from leasehold.workflows.rerun import retry_workflow
from tests.conftest import MakeApp
from tests.integration.helpers import deliver, submit_swept
from tests.integration.test_event_batching import BUS, Bus
from tests.integration.workflow_helpers import run_until_idle


@pytest.fixture
def both(endpoint: str, monkeypatch: pytest.MonkeyPatch, make_app: MakeApp,
         registry: TaskRegistry, tmp_path: Path) -> Leasehold:
    """An app whose events come from the stream, with the inline publisher installed too."""
    for service in ("DYNAMODB", "DYNAMODB_STREAMS", "DYNAMODBSTREAMS"):
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service}", endpoint)
    registry.task("ok")(lambda payload, ctx: payload)

    @registry.task("bad", max_attempts=1)
    def bad(payload: Any, ctx: Any) -> Any:
        raise NonRetryableError("fails every time")

    registry.task("rebuild", debounce={"key": "doc:{payload.doc}", "seconds": 10,
                                       "max_wait_seconds": 25})(lambda payload, ctx: payload)
    boto3.client("events", region_name="us-east-1").create_event_bus(Name=BUS)
    app = make_app(event_bus=BUS, events_from="stream", publish="all")
    assert publishing.install(app, FileSink(tmp_path / "inline.jsonl")) is not None
    return app


def relay(app: Leasehold, tmp_path: Path) -> int:
    return poll(app, FileSink(tmp_path / "relay.jsonl"), Checkpoint(tmp_path / "relay.json"))


def ids(path: Path, job_id: str | None = None) -> list[tuple[str, str]]:
    """(event id, state) of each event in a log, in order (of one job, if given)."""
    return [(e["detail"]["event_id"], e["detail"]["state"]) for e in tail(path)
            if job_id is None or e["detail"]["job_id"] == job_id]


def assert_one_id_per_change(tmp_path: Path) -> list[tuple[str, str]]:
    """Each change published inline once with an id of its own, and the relay gave every
    change the same id (the relay's log may repeat one: at least once)."""
    inline = ids(tmp_path / "inline.jsonl")
    assert inline, "nothing was published"
    assert len({event for event, _ in inline}) == len(inline), Counter(inline).most_common(3)
    assert set(ids(tmp_path / "relay.jsonl")) == set(inline)
    return inline


def test_a_step_cancelled_again_after_a_workflow_retry_gets_a_new_event_id(
        both: Leasehold, tmp_path: Path) -> None:
    app = both
    # a -> b -> c: b fails, c is cancelled; a retry takes c back to WAITING at the same
    # epoch, b fails again, c is cancelled again: the same (job, epoch, state) twice.
    spec = parse_workflow({"name": "twice", "steps": [
        {"id": "a", "task": "ok"}, {"id": "b", "task": "bad", "depends_on": ["a"]},
        {"id": "c", "task": "ok", "depends_on": ["b"]}]})
    workflow = start_workflow(app, spec).workflow.workflow_id
    run_until_idle(app)
    retry_workflow(app, workflow)
    run_until_idle(app)
    c = app.store.get(step_job_id(workflow, "c", "default"))
    assert c.state is JobState.CANCELLED
    relay(app, tmp_path)
    cancels = [event for event, state in ids(tmp_path / "relay.jsonl", c.job_id)
               if state == "CANCELLED"]
    assert len(cancels) == 2 and cancels[0] != cancels[1]
    assert cancels[-1] == event_id(c)  # the row's own id
    assert_one_id_per_change(tmp_path)


def test_a_lost_response_on_a_transition_or_a_lease_gives_one_event_id(
        both: Leasehold, tmp_path: Path) -> None:
    app = both
    job = submit(app, JobSpec(task="ok", payload=1)).job
    # The lease's and the finish's responses are lost: botocore sends each again, the
    # condition refuses the retry, and the store recognises its own write.
    injector = FaultInjector([Fault(target="dynamodb.UpdateItem", kind="lose", times=2)])
    injector.install(app.clients.dynamodb)
    deliver(app)
    assert injector.injected == Counter({("dynamodb.UpdateItem", "lose"): 2})
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    relay(app, tmp_path)
    inline = assert_one_id_per_change(tmp_path)
    assert [state for _, state in inline] == ["QUEUED", "RUNNING", "SUCCEEDED"]


def test_a_relay_killed_mid_batch_publishes_the_same_event_ids_when_it_resumes(
        both: Leasehold, tmp_path: Path) -> None:
    app = both
    bus = Bus(app)
    for n in range(6):
        submit(app, JobSpec(task="ok", payload=n))
    deliver(app)  # 18 changes: two PutEvents requests for the relay's batch
    sink = EventBridgeSink(app.clients.client("events"), BUS)
    calls = itertools.count()
    injector = FaultInjector([Fault(target="eventbridge.PutEvents", kind="crash",
                                    when=lambda _: next(calls) == 1)])
    injector.install(app.clients.client("events"))
    checkpoint = Checkpoint(tmp_path / "relay.json")
    with contextlib.suppress(InjectedCrash):
        poll(app, sink, checkpoint)  # dies after its first request, before its checkpoint
    assert injector.dead
    first = delivered(bus)
    assert sum(first.values()) == 10
    injector.revive()
    poll(app, sink, checkpoint)  # the whole batch again
    inline = [event for event, _ in ids(tmp_path / "inline.jsonl")]
    assert len(inline) == 18
    # Every change once with its id, and the repeats with the ids they had.
    assert delivered(bus) == Counter(inline)
    assert set(first) <= set(inline)


def delivered(bus: Bus) -> Counter[str]:
    """The event ids that reached the bus since the last call (its rule's queue, drained)."""
    seen: Counter[str] = Counter()
    while messages := bus.sqs.receive_message(QueueUrl=bus.url, MaxNumberOfMessages=10
                                              ).get("Messages", []):
        for message in messages:
            seen[json.loads(message["Body"])["detail"]["event_id"]] += 1
            bus.sqs.delete_message(QueueUrl=bus.url, ReceiptHandle=message["ReceiptHandle"])
    return seen


def test_debounce_joins_and_a_manual_retry_each_get_an_event_id_of_their_own(
        both: Leasehold, clock: FakeClock, tmp_path: Path) -> None:
    app = both
    window = submit(app, JobSpec(task="rebuild", payload={"doc": "d", "n": 0})).job
    for n, seconds in enumerate((5, 9, 9), start=1):  # each join pushes the run out
        clock.advance(seconds)
        submit(app, JobSpec(task="rebuild", payload={"doc": "d", "n": n}))
    capped = app.store.get(window.job_id)
    assert capped.run_at == window.created_at + 25_000
    clock.advance(1)
    # Capped already: the join changes the payload only, QUEUED -> QUEUED at the same epoch.
    joined = submit(app, JobSpec(task="rebuild", payload={"doc": "d", "n": 4})).job
    assert (joined.job_id, joined.epoch) == (window.job_id, capped.epoch)
    # A cancelled job run again by hand, then cancelled again.
    job = submit(app, JobSpec(task="ok", payload=1, delay_seconds=600)).job
    control.cancel(app, job.job_id)
    control.retry(app, job.job_id)
    control.cancel(app, job.job_id)
    relay(app, tmp_path)
    joins = ids(tmp_path / "relay.jsonl", window.job_id)
    assert [state for _, state in joins] == ["QUEUED"] * 5
    assert len({event for event, _ in joins}) == 5
    assert [state for _, state in ids(tmp_path / "relay.jsonl", job.job_id)] == [
        "QUEUED", "CANCELLED", "QUEUED", "CANCELLED"]
    assert_one_id_per_change(tmp_path)


def test_a_write_that_changes_no_state_is_no_event(
        both: Leasehold, clock: FakeClock, tmp_path: Path) -> None:
    app = both
    job = submit_swept(app, JobSpec(task="ok", payload=1, delay_seconds=60)).job  # an entry
    queued = app.store.get(job.job_id)
    # The sweeper moves a QUEUED row's sweep bound: a write, not a change of the job.
    assert app.store.move_sweep(queued, queued.run_at + 120_000)
    relay(app, tmp_path)
    assert [state for _, state in ids(tmp_path / "relay.jsonl")] == ["QUEUED"]
    assert ids(tmp_path / "relay.jsonl") == ids(tmp_path / "inline.jsonl") == [
        (event_id(queued), "QUEUED")]
    assert app.store.get(job.job_id).extra[CHANGES] == queued.extra[CHANGES] == 0
