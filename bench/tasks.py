"""Tasks the benchmarks run: a no-op, and one that fails its first attempt."""

from __future__ import annotations

from typing import Any

from leasehold import JobContext, RetryPolicy, task


@task("bench.noop", timeout_seconds=60)
def noop(payload: Any, ctx: JobContext) -> None:
    """Does nothing: what is measured is the scheduler, not the job."""
    return None


class PlannedFailure(RuntimeError):
    """The failure ``bench.fail_once`` raises on its first attempt."""


@task("bench.fail_once", timeout_seconds=60,
      retry=RetryPolicy(min_backoff_seconds=0.0, max_backoff_seconds=1.0))
def fail_once(payload: Any, ctx: JobContext) -> None:
    """Fails attempt 1, succeeds attempt 2 (one retry, as cheap as the policy allows)."""
    if ctx.attempt <= 1:
        raise PlannedFailure("first attempt fails on purpose")


@task("bench.echo", timeout_seconds=60)
def echo(payload: Any, ctx: JobContext) -> Any:
    """Returns its payload: what ``bench.client_latency`` waits for."""
    return payload


@task("bench.steps", timeout_seconds=60)
def steps(payload: Any, ctx: JobContext) -> int:
    """``payload`` durable steps, each returning a small value (``bench.durable``)."""
    return sum(ctx.step(f"s{i}", lambda i=i: i) for i in range(int(payload)))


@task("bench.nap", timeout_seconds=60)
def nap(payload: Any, ctx: JobContext) -> str:
    """A durable sleep of ``payload`` seconds: resume latency after a sleep."""
    ctx.sleep(float(payload))
    return "rested"


@task("bench.await", timeout_seconds=60)
def await_callback(payload: Any, ctx: JobContext) -> Any:
    """Waits for a callback whose token it shows in its progress."""
    cb = ctx.callback("go", timeout_seconds=600)
    ctx.heartbeat({"token": cb.token})
    return cb.wait()


#: The application table ``bench.effect`` writes to (``bench.option_cost`` creates it).
EFFECTS_TABLE = "leasehold-bench-effects"


@task("bench.effect", timeout_seconds=60)
def effect(payload: Any, ctx: JobContext) -> None:
    """One ``ctx.transact`` item, committed with the job's success."""
    ctx.transact([{"Put": {"TableName": EFFECTS_TABLE, "Item": {"k": {"S": ctx.job_id}}}}])
