"""Hand-offs carry the tenant as SQS message group, which makes standard queues fair queues."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

import leasehold
from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import as_event
from leasehold.lifecycle.submission import submit

from .helpers import deliver, receive_all


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


def test_retries_and_sweeper_re_sends_keep_the_tenant_as_message_group(
        app: Leasehold, registry: TaskRegistry, clock: FakeClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    failed: list[str] = []

    @registry.task("once-flaky", max_attempts=3)
    def once_flaky(payload: Any, ctx: Any) -> Any:
        if not failed:
            failed.append(ctx.job_id)
            raise ConnectionError("transient")
        return payload

    groups: list[str | None] = []
    send = app.queues.send

    def recorded(*args: Any, group: str | None = None, **kwargs: Any) -> None:
        groups.append(group)  # then the real send: the retry may be delayed in SQS
        send(*args, group=group, **kwargs)

    submit(app, JobSpec(task="once-flaky", tenant="acme"))
    with monkeypatch.context() as patch:
        patch.setattr(app.queues, "send", recorded)
        assert deliver(app, once=True) == 1  # fails: the retry is a new hand-off
    assert groups == ["acme"]

    def broken_send(*args: Any, **kwargs: Any) -> None:
        raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "down"}},
                          "SendMessage")

    with monkeypatch.context() as patch:
        patch.setattr(app.queues, "send", broken_send)
        submit(app, JobSpec(task="once-flaky", tenant="globex"))
    assert receive_all(app) == []
    clock.advance(app.settings.handoff_seconds + app.settings.skew_grace_seconds + 1)
    assert sweeper.sweep(app).redispatched == 1
    assert [m.group for m in receive_all(app)] == ["globex"]


def test_every_hand_off_goes_through_the_one_send_that_names_the_tenant() -> None:
    # Retries, sweeper re-sends, redrives, workflow steps, schedules and triggers all call
    # handoff.send; a new direct send to a pool queue would lose the tenant's group.
    package = Path(leasehold.__file__).parent
    direct = [str(path.relative_to(package)) for path in package.rglob("*.py")
              if re.search(r"queues\.send\(", path.read_text())]
    assert direct == ["lifecycle/handoff.py"]
