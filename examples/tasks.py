"""Example tasks, loaded by ``leasehold dev`` unless ``--tasks`` names others."""

from __future__ import annotations

from typing import Any

from leasehold import JobContext, task


@task("echo")
def echo(payload: Any, ctx: JobContext) -> Any:
    """Returns its payload."""
    return payload


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
