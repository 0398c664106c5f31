"""``leasehold.testing``, as an application's tests use it: a context to call a handler with,
a task run eagerly with its retries and limits, and an in-process runtime over moto."""

from __future__ import annotations

from typing import Any

import pytest

import examples.tasks
from leasehold.client import Cancelled, JobFailed
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import MAX_RESULT_BYTES
from leasehold.errors import NonRetryableError, PayloadTooLarge
from leasehold.testing import Attempts, make_context, run_task
from leasehold.testing.fixtures import leasehold  # noqa: F401  (the fixture, as a plugin gives it)
from leasehold.testing.local import LocalLeasehold


def test_make_context_fills_every_field_and_records_heartbeats() -> None:
    beats: list[Any] = []
    ctx = make_context("send-email", attempt=2, heartbeats=beats, labels={"team": "x"})
    assert (ctx.task, ctx.attempt, ctx.max_attempts, ctx.tenant) == ("send-email", 2, 5,
                                                                      "default")
    assert ctx.idempotency_key == ctx.job_id and ctx.fencing_token == 1
    ctx.heartbeat({"done": 3})
    assert beats == [{"done": 3}] and not ctx.cancelled
    ctx.cancel("test")
    assert ctx.cancelled and ctx.wait_cancelled(0)
    assert examples.tasks.send_email({"to": "a@example.com"}, make_context())["sent"] is True


def test_run_task_retries_per_the_tasks_policy_then_raises_its_own_error() -> None:
    attempts = Attempts()
    assert run_task("flaky", {"failures": 2}, attempts=attempts) == {"attempts": 3}
    assert [kind for kind, _ in attempts.errors] == ["ExampleFailure"] * 2
    assert len(attempts.delays) == 2 and all(d >= 0 for d in attempts.delays)

    failed = Attempts()
    with pytest.raises(examples.tasks.ExampleFailure, match="attempt 3"):
        run_task("fail", attempts=failed)  # max_attempts=3
    assert len(failed.errors) == 3


def test_run_task_stops_at_once_on_a_non_retryable_error_and_checks_sizes() -> None:
    registry = TaskRegistry()
    calls: list[int] = []

    @registry.task("picky", max_attempts=5)
    def picky(payload: Any, ctx: Any) -> Any:
        calls.append(ctx.attempt)
        if payload == "bad":
            raise NonRetryableError("bad input")
        return "y" * payload

    with pytest.raises(NonRetryableError):
        run_task("picky", "bad", registry=registry)
    assert calls == [1]
    with pytest.raises(PayloadTooLarge, match="result"):
        run_task("picky", MAX_RESULT_BYTES, registry=registry)  # quoted: 2 bytes over
    assert run_task("picky", 3, registry=registry) == "yyy"
    with pytest.raises(PayloadTooLarge, match="payload"):  # echo takes at most 64 KB
        run_task("echo", "x" * MAX_RESULT_BYTES)


def test_the_fixture_runs_submitted_jobs_through_the_real_client(
        leasehold: LocalLeasehold) -> None:  # noqa: F811
    job = examples.tasks.send_email.submit({"to": "a@example.com"})  # type: ignore[attr-defined]
    assert job.result(timeout=10)["to"] == "a@example.com"
    assert leasehold.client.submit("echo", [1, 2]).result(timeout=10) == [1, 2]
    retried = leasehold.client.submit("flaky", {"failures": 1}, retry={
        "min_backoff_seconds": 0, "max_backoff_seconds": 0})
    assert retried.result(timeout=10) == {"attempts": 2}

    dead = leasehold.client.submit("fail", max_attempts=1)
    with pytest.raises(JobFailed) as raised:
        dead.result(timeout=10)
    assert raised.value.type == "ExampleFailure"
    assert 'examples/tasks.py", line' in raised.value.remote_traceback

    later = leasehold.client.submit("echo", "later", delay_seconds=600)
    later.cancel()
    with pytest.raises(Cancelled):
        later.result(timeout=10)


def test_an_aws_target_in_the_fixture_runs_as_a_session_of_a_targets_role(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import mock_aws
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    with mock_aws():
        local = LocalLeasehold(registry=TaskRegistry(), targets={"aws_targets": [
            {"action": "sts:GetCallerIdentity", "resources": ["*"]}]})
        try:
            handle = local.client.submit_target({"aws": {"service": "sts",
                                                         "action": "GetCallerIdentity"}})
            arn = handle.result(timeout=10)["Arn"]
        finally:
            local.close()
    assert ":assumed-role/" in arn and arn.endswith(f"@{handle.job_id}")
