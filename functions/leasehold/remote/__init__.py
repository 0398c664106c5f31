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

from leasehold.core.registry import TaskDefinition
from leasehold.errors import ValidationError
from leasehold.lifecycle.app import Leasehold


def run_elsewhere(payload: object, ctx: object) -> object:
    """The handler of an external task: a Python worker never runs it."""
    raise ValidationError("task", "an external task runs on remote workers "
                                  "(POST /workers/lease), never on a Python worker")


def install(app: Leasehold) -> None:
    """Register the deployment's external tasks, each in its pool."""
    for pool, names in app.settings.external_tasks.items():
        for name in names:
            app.registry.register(TaskDefinition(name=name, fn=run_elsewhere, pool=pool))


__all__ = ["install", "run_elsewhere"]
