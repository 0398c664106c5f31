"""Hand-offs carry the tenant as SQS message group, which makes standard queues fair queues."""

from __future__ import annotations

from typing import Any

from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import as_event
from leasehold.lifecycle.submission import submit

from .helpers import receive_all


def test_every_hand_off_names_its_tenant_as_message_group(
        app: Leasehold, registry: TaskRegistry) -> None:
    @registry.task("echo")
    def echo(payload: Any, ctx: Any) -> Any:
        return payload

    for tenant in ("acme", "globex", "acme"):
        submit(app, JobSpec(task="echo", tenant=tenant))
    received = receive_all(app)
    assert sorted(m.group or "" for m in received) == ["acme", "acme", "globex"]
    # Lambda's SQS records carry it too (the local consumer builds the same event).
    event = as_event(received, "arn:aws:sqs:us-east-1:123456789012:q")
    assert sorted(r["attributes"]["MessageGroupId"] for r in event["Records"]) == [
        "acme", "acme", "globex"]
