"""Example tasks, loaded by ``leasehold dev`` unless ``--tasks`` names others."""

from __future__ import annotations

from typing import Any

from leasehold import JobContext, RetryPolicy, task
from leasehold.core.spec import MAX_RESULT_BYTES


# Its result is its payload, so its payload gets the result limit: a larger one is refused
# at submit instead of failing the job after it ran.
@task("echo", max_payload_bytes=MAX_RESULT_BYTES)
def echo(payload: Any, ctx: JobContext) -> Any:
    """Returns its payload."""
    return payload


@task("ping")
def ping(payload: Any, ctx: JobContext) -> str:
    """Answers ``pong``: the smallest job, for trying schedules."""
    return "pong"


@task("report", timeout_seconds=600)
def report(payload: Any, ctx: JobContext) -> dict[str, Any]:
    """Stands in for a nightly report: ``{"kind": "daily"}`` names which."""
    return {"report": (payload or {}).get("kind", "daily"), "for": ctx.job_id}


@task("send-email", max_attempts=5, timeout_seconds=30,
      retry=RetryPolicy(min_backoff_seconds=2, max_backoff_seconds=600))
def send_email(payload: Any, ctx: JobContext) -> dict[str, Any]:
    """Stands in for sending ``{"to": ...}`` a message (it sends nothing). The idempotency key
    is stable across attempts: a real sender passes it on so a retry never sends twice."""
    return {"sent": True, "to": (payload or {}).get("to"), "key": ctx.idempotency_key}


@task("sleep", timeout_seconds=3600)
def sleep(payload: Any, ctx: JobContext) -> dict[str, Any]:
    """Sleeps ``{"seconds": n}``, reporting progress each second; stops early if cancelled."""
    seconds = float((payload or {}).get("seconds", 1))
    slept = 0.0
    while slept < seconds:
        step = min(1.0, seconds - slept)
        if ctx.wait_cancelled(step):
            return {"slept": slept, "cancelled": True}
        slept += step
        ctx.heartbeat({"slept": round(slept, 3), "of": seconds})
    return {"slept": seconds}


class ExampleFailure(RuntimeError):
    """What ``fail`` and ``flaky`` raise."""


@task("fail", max_attempts=3)
def fail(payload: Any, ctx: JobContext) -> None:
    """Always raises."""
    raise ExampleFailure(f"failing on purpose (attempt {ctx.attempt})")


@task("flaky")
def flaky(payload: Any, ctx: JobContext) -> dict[str, int]:
    """Fails the first ``{"failures": n}`` attempts, then succeeds."""
    failures = int((payload or {}).get("failures", 1))
    if ctx.attempt <= failures:
        raise ExampleFailure(f"attempt {ctx.attempt} of {failures} planned failures")
    return {"attempts": ctx.attempt}


@task("count", timeout_seconds=60)
def count(payload: Any, ctx: JobContext) -> dict[str, Any]:
    """Adds 1 to ``payload["key"]``'s counter in the DynamoDB table ``payload["table"]``, in
    the transaction that records the job's success (``ctx.transact``): exactly once per job,
    however often it runs. ``payload["seconds"]``: how long it works first."""
    if ctx.wait_cancelled(float(payload.get("seconds", 0))):
        return {"cancelled": True}
    ctx.transact([{"Update": {
        "TableName": payload["table"], "Key": {"key": {"S": payload["key"]}},
        "UpdateExpression": "ADD n :one", "ExpressionAttributeValues": {":one": {"N": "1"}}}}])
    return {"counted": payload["key"]}


@task("await-callback", timeout_seconds=60)
def await_callback(payload: Any, ctx: JobContext) -> Any:
    """Waits (asleep, holding no worker) for its callback ``done``, for up to
    ``{"seconds": n}`` (default an hour), and returns the value it was completed with. Its
    token is in ``GET /jobs/{id}/steps``: complete it with ``POST /callbacks/{token}``."""
    seconds = float((payload or {}).get("seconds", 3600)) if isinstance(payload, dict) else 3600
    return ctx.callback("done", timeout_seconds=seconds).wait()
