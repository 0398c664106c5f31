"""The relay reads what each emulator writes to the jobs table's stream, and a record it
cannot read is set aside after a few tries instead of stopping the relay (issue 29, defect 12).

Each test runs twice: on moto (the embedded emulator's server: moto serves
``dynamodbstreams`` only as a server) and on AWS's DynamoDB Local, whose stream images differ
(an empty map has no type): a row of the fidelity table in docs/design.md. SQS and
EventBridge stay in-process moto.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from leasehold.aws.definitions import job_key
from leasehold.aws.dynamo import to_av
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.events.publishing import FileSink, tail
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.deletion import delete_finished
from leasehold.lifecycle.submission import submit
from leasehold.streams import poller
from leasehold.streams.enqueue import enqueue_item
from leasehold.streams.poller import Checkpoint, StreamReader, stream_arn
from leasehold.streams.relay import relay as relay_batch
from tests.conftest import MakeApp
from tests.integration.helpers import deliver

pytestmark = pytest.mark.ddblocal


@pytest.fixture
def app(backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
        make_app: MakeApp, registry: TaskRegistry) -> Leasehold:
    """An app whose DynamoDB serves streams: the emulator's server, or DynamoDB Local."""
    if backend == "moto":
        endpoint = request.getfixturevalue("endpoint")
    elif backend == "ddblocal":
        endpoint = request.getfixturevalue("dynamodb_local")
    else:
        pytest.skip("pins moto's and DynamoDB Local's own stream records")
    for service in ("DYNAMODB", "DYNAMODB_STREAMS", "DYNAMODBSTREAMS"):
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service}", endpoint)
    registry.task("ok")(lambda payload, ctx: payload)
    # Finished rows kept for years: the fake clock is months behind DynamoDB Local's, whose
    # TTL would otherwise delete them within seconds of their finish.
    return make_app(events_from="stream", publish="all", retention_days=3650)


class Relay:
    """The local relay over the app's stream, from a checkpoint in ``tmp_path``."""

    def __init__(self, app: Leasehold, tmp_path: Path) -> None:
        self.app, self.log = app, tmp_path / "events.jsonl"
        self.checkpoint = Checkpoint(tmp_path / "relay.json")
        self.dead = tmp_path / poller.SET_ASIDE
        self.reader = StreamReader(app, FileSink(self.log), self.checkpoint)

    def step(self) -> int:
        return self.reader.step()

    def events(self) -> list[tuple[str, str]]:
        return [(e["detail"]["job_id"], e["detail"]["state"]) for e in tail(self.log)]

    def set_aside(self) -> list[dict[str, Any]]:
        if not self.dead.exists():
            return []
        return [json.loads(line) for line in self.dead.read_text().splitlines()]


def records(app: Leasehold) -> list[dict[str, Any]]:
    """Every record of the jobs table's stream so far (one shard here)."""
    streams = app.clients.client("dynamodbstreams")
    arn = stream_arn(app)
    found: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                              ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while iterator and (batch := streams.get_records(ShardIterator=iterator))["Records"]:
            found += batch["Records"]
            iterator = batch.get("NextShardIterator")
    return found


def test_the_relay_reads_each_emulators_image_of_an_empty_map(
        app: Leasehold, backend: str, tmp_path: Path) -> None:
    # A job with no labels (``labels: {}``), as every job submitted through the API, and one
    # made by enqueue_item, which only the relay hands off.
    job = submit(app, JobSpec(task="ok", payload=1)).job
    entries = enqueue_item(app, "ok", {"n": 2}, tenant="default")
    app.clients.dynamodb.transact_write_items(TransactItems=entries)
    enqueued = entries[0]["Put"]["Item"]["job_id"]["S"]
    [image] = [r["dynamodb"]["NewImage"] for r in records(app)
               if r["eventName"] == "INSERT" and r["dynamodb"]["Keys"]["job_id"]["S"] == job.job_id]
    # What each writes for the empty map (AWS writes it typed, as moto does).
    assert image["labels"] == ({"M": {}} if backend == "moto" else {})
    relay = Relay(app, tmp_path)
    relay.step()  # the enqueued job is handed off: its message is in the queue now
    assert deliver(app) == 2
    relay.step()
    assert app.store.get(enqueued).state is JobState.SUCCEEDED
    assert relay.events() == [(j, s) for j in (job.job_id, enqueued)
                              for s in ("QUEUED",)] + [
        (j, s) for j in (job.job_id, enqueued) for s in ("RUNNING", "SUCCEEDED")]
    assert relay.set_aside() == []


def test_a_record_the_relay_cannot_read_is_set_aside_after_its_tries_and_the_rest_go_out(
        app: Leasehold, tmp_path: Path) -> None:
    relay = Relay(app, tmp_path)
    before = submit(app, JobSpec(task="ok", payload=1)).job
    # A row with a state that is no job this version can read (no tenant, no task, ...).
    app.clients.dynamodb.put_item(TableName=app.settings.jobs_table, Item=job_key(
        "not-a-job") | to_av({"state": "QUEUED", "epoch": 1}))
    after = submit(app, JobSpec(task="ok", payload=2)).job
    for _ in range(poller.TRIES - 1):
        relay.step()
        # The record before it went out and its position is kept; nothing after it yet.
        assert relay.events() == [(before.job_id, "QUEUED")]
        assert relay.set_aside() == []
    relay.step()
    [dead] = relay.set_aside()
    assert dead["record"]["dynamodb"]["Keys"] == job_key("not-a-job")
    assert dead["tries"] == poller.TRIES and "not a job row" in dead["error"]
    assert relay.events() == [(before.job_id, "QUEUED"), (after.job_id, "QUEUED")]
    # The relay goes on from after it: a later change is published, the record is not read
    # again, and a new relay resumes from the checkpoint past it.
    deliver(app)
    Relay(app, tmp_path).step()
    assert len(relay.set_aside()) == 1
    assert [e for e in relay.events() if e[0] == after.job_id] == [
        (after.job_id, "QUEUED"), (after.job_id, "RUNNING"), (after.job_id, "SUCCEEDED")]


def test_a_deleted_row_is_no_event_for_the_relay(
        app: Leasehold, tmp_path: Path) -> None:
    job = submit(app, JobSpec(task="ok", payload=1)).job
    deliver(app)
    done = app.store.get(job.job_id)
    assert delete_finished(app, [done]).deleted == [done.job_id]  # a REMOVE record
    assert [r["eventName"] for r in records(app)][-1] == "REMOVE"
    relay = Relay(app, tmp_path)
    relay.step()
    assert relay.events() == [(job.job_id, s) for s in ("QUEUED", "RUNNING", "SUCCEEDED")]
    assert relay.set_aside() == []


def test_the_deployed_relay_reports_the_record_it_cannot_read_and_publishes_those_before_it(
        app: Leasehold, tmp_path: Path) -> None:
    """The Lambda handler's part: a partial batch response from the undecodable record (the
    mapping retries from it, then gives its range to the on-failure destination)."""
    before = submit(app, JobSpec(task="ok", payload=1)).job
    app.clients.dynamodb.put_item(TableName=app.settings.jobs_table, Item=job_key(
        "not-a-job") | to_av({"state": "QUEUED", "epoch": 1}))
    after = submit(app, JobSpec(task="ok", payload=2)).job
    batch = records(app)
    [bad] = [i for i, r in enumerate(batch) if r["dynamodb"]["Keys"]["job_id"]["S"] == "not-a-job"]
    log = tmp_path / "events.jsonl"
    assert relay_batch(batch, FileSink(log), "all", app.now) == [
        batch[bad]["dynamodb"]["SequenceNumber"]]
    assert [e["detail"]["job_id"] for e in tail(log)] == [before.job_id]
    # Past it (once the mapping gave it up), the rest goes out.
    assert relay_batch(batch[bad + 1:], FileSink(log), "all", app.now) == []
    assert [e["detail"]["job_id"] for e in tail(log)] == [before.job_id, after.job_id]
