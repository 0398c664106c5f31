"""Drive workflows through the real queues and worker in moto, one delivery round at a time."""

from __future__ import annotations

from typing import Any

from leasehold.aws.queues import Received
from leasehold.core.registry import TaskRegistry
from leasehold.errors import NonRetryableError
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.worker import Worker
from leasehold.settings import PRIORITIES
from leasehold.workflows import WorkflowSpec, get_workflow, parse_workflow, step_inputs

#: a -> (b, c) -> d: fan-out then fan-in.
DIAMOND = [
    {"id": "a", "task": "ok", "payload": 1},
    {"id": "b", "task": "ok", "depends_on": ["a"]},
    {"id": "c", "task": "ok", "depends_on": ["a"]},
    {"id": "d", "task": "ok", "depends_on": ["b", "c"]},
]


def receive(app: Leasehold) -> list[Received]:
    """Every visible message of the default pool (taken: invisible for the visibility timeout)."""
    messages: list[Received] = []
    for priority in PRIORITIES:
        url = app.queues.url("default", priority)
        while batch := app.queues.receive(url, max_messages=10):
            messages += batch
    return messages


def run_until_idle(app: Leasehold, *, rounds: int = 50) -> int:
    """Deliver messages round by round until no message is left; returns how many ran."""
    worker = Worker(app)
    total = 0
    for _ in range(rounds):
        messages = receive(app)
        if not messages:
            return total
        by_queue: dict[str, list[Received]] = {}
        for message in messages:
            by_queue.setdefault(message.queue_url, []).append(message)
        for batch in by_queue.values():
            for start in range(0, len(batch), 10):
                consume(worker, batch[start:start + 10])
        total += len(messages)
    raise AssertionError(f"still delivering after {rounds} rounds")


def states(app: Leasehold, workflow_id: str) -> dict[str, str]:
    return {s["id"]: s["state"] for s in get_workflow(app, workflow_id).view()["steps"]}


def spec(steps: list[dict[str, Any]], **fields: Any) -> WorkflowSpec:
    return parse_workflow({"steps": steps, **fields})


def register_tasks(registry: TaskRegistry) -> list[tuple[str, dict[str, Any]]]:
    """Tasks ``ok`` (returns its step and payload) and ``boom`` (fails at once, no retry).

    Returns the list each call appends ``(step id, the inputs it received)`` to.
    """
    calls: list[tuple[str, dict[str, Any]]] = []

    @registry.task("ok")
    def ok(payload: Any, ctx: Any) -> Any:
        calls.append((ctx.extra["step_id"], step_inputs(ctx)))
        return {"step": ctx.extra["step_id"], "payload": payload}

    @registry.task("boom")
    def boom(payload: Any, ctx: Any) -> Any:
        calls.append((ctx.extra["step_id"], step_inputs(ctx)))
        raise NonRetryableError(f"{ctx.extra['step_id']} failed on purpose")

    return calls
