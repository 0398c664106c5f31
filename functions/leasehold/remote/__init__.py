"""Workers in any language: the lease protocol over HTTP (issue 34).

A remote worker leases jobs (``POST /workers/lease``), heartbeats them and reports their
outcome (``/jobs/{id}/heartbeat``, ``/complete``, ``/fail``). Nothing here re-implements the
lifecycle: a lease is the polling worker's receive (priorities, long polls, pauses) and the
in-process worker's :meth:`~leasehold.lifecycle.worker.Worker.take` (the fenced lease with the
message's flow-control gate); a heartbeat is :func:`leasehold.lifecycle.heartbeat.extend`; a
finish is :meth:`~leasehold.lifecycle.worker.Worker.record` (retries, burial, cancellation).
The lease's token is its owner: every write after the lease is conditioned on it, so a
zombie (a token whose lease was taken over) changes nothing.

Which tasks run on remote workers is the deployment's declaration
(``Settings.external_tasks``, ``PoolConfig(kind="external")``, ``leasehold dev --external``):
:func:`install` registers them so ``POST /jobs`` accepts their names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskDefinition
from leasehold.errors import ValidationError
from leasehold.settings import PRIORITIES

if TYPE_CHECKING:  # the local gateway imports remote.hangup: no AWS SDK at its import
    from leasehold.lifecycle.app import Leasehold


def run_elsewhere(payload: object, ctx: object) -> object:
    """The handler of an external task: a Python worker never runs it."""
    raise ValidationError("task", "an external task runs on remote workers "
                                  "(POST /workers/lease), never on a Python worker")


def definition(name: str, pool: str, policy: Mapping[str, Any]) -> TaskDefinition:
    """An external task's definition, with its policy's defaults (timeout, attempts, retry,
    priority) for its jobs, as a Python task's decorator gives them."""
    options: dict[str, Any] = {}
    try:
        if "timeout_seconds" in policy:
            options["timeout_seconds"] = float(policy["timeout_seconds"])
            if not options["timeout_seconds"] > 0:
                raise ValueError("timeout_seconds must be above 0")
        if "max_attempts" in policy:
            options["max_attempts"] = int(policy["max_attempts"])
            if options["max_attempts"] < 1:
                raise ValueError("max_attempts must be at least 1")
        if "retry" in policy:
            retry = dict(policy["retry"])
            if "non_retryable" in retry:
                retry["non_retryable"] = tuple(retry["non_retryable"])
            options["retry"] = RetryPolicy(**retry)
        if "priority" in policy:
            if policy["priority"] not in PRIORITIES:
                raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}")
            options["priority"] = str(policy["priority"])
    except (TypeError, ValueError) as exc:
        raise ValidationError("external_policies", f"{name!r}: {exc}") from exc
    return TaskDefinition(name=name, fn=run_elsewhere, pool=pool, **options)


def install(app: Leasehold) -> None:
    """Register the deployment's external tasks, each in its pool with its policy."""
    policies = app.settings.external_policies
    for pool, names in app.settings.external_tasks.items():
        for name in names:
            app.registry.register(definition(name, pool, policies.get(name, {})))


__all__ = ["definition", "install", "run_elsewhere"]
