"""Durable execution: steps that survive retries, sleeps and callbacks that free the worker,
children awaited (issue 23; docs/design.md, "Durable execution").

Installed by :func:`leasehold.compose.compose`: an attempt hook gives every attempt's context
its provider (``ctx.step``, ``ctx.sleep``, ...), and a store observer wakes parents whose
children finished. The lifecycle knows only ``Suspend`` and ``SLEEPING``.
"""

from __future__ import annotations

from leasehold.durable import runs
from leasehold.durable.children import observe
from leasehold.durable.runner import install_runner
from leasehold.lifecycle.app import Leasehold


def install(app: Leasehold) -> None:
    app.attempt_hooks.append(install_runner(app))
    app.store.observers.append(observe(app))
    app.restarts.append(runs.restart)
