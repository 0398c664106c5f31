"""Job state events: published on every change, to a local log or an EventBridge bus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3

from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.events import publishing as events
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from tests.conftest import MakeApp
from tests.integration.helpers import deliver


def test_every_state_change_is_appended_to_the_local_event_log(
    make_app: MakeApp, registry: TaskRegistry, tmp_path: Path
) -> None:
    registry.task("echo")(lambda payload, ctx: payload)
    log = tmp_path / "events.jsonl"
    app = make_app(event_bus=f"file:{log}", publish="all")
    job = submit(app, JobSpec(task="echo", payload=1)).job
    deliver(app)
    seen = [e for e in events.tail(log) if e["detail"]["job_id"] == job.job_id]
    assert [e["detail-type"] for e in seen] == ["Job Queued", "Job Running", "Job Succeeded"]
    assert {e["source"] for e in seen} == {"leasehold.job"}
    assert [e["detail"]["previous_state"] for e in seen] == [None, "QUEUED", "RUNNING"]
    assert "payload" not in seen[0]["detail"]


def test_events_go_to_the_eventbridge_bus_where_a_rule_can_route_them(
    make_app: MakeApp, registry: TaskRegistry
) -> None:
    registry.task("echo")(lambda payload, ctx: payload)
    client = boto3.client("events", region_name="us-east-1")
    client.create_event_bus(Name="leasehold-test")
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName="job-events")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"]
    client.put_rule(Name="done", EventBusName="leasehold-test",
                    EventPattern='{"source": ["leasehold.job"], '
                                 '"detail-type": ["Job Succeeded"]}')
    client.put_targets(Rule="done", EventBusName="leasehold-test",
                       Targets=[{"Id": "q", "Arn": arn}])
    app: Leasehold = make_app(event_bus="leasehold-test", publish="all")
    job = submit(app, JobSpec(task="echo", payload=1)).job
    deliver(app)
    import json

    bodies: list[Any] = [json.loads(m["Body"]) for m in sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])]
    assert [(b["detail-type"], b["detail"]["job_id"]) for b in bodies] == [
        ("Job Succeeded", job.job_id)]
