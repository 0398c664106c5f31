"""Durable execution: steps that survive retries, sleeps and callbacks that free the worker,
children awaited and cancelled with their parent (issues 23, 29; docs/design.md, "Durable
execution").

Installed by :func:`leasehold.compose.compose`: an attempt hook gives every attempt's context
its provider (``ctx.step``, ``ctx.sleep``, ...), a store observer wakes parents whose
children finished and cancels the children of parents that ended, and a sweeper repair
cancels them for a process that died in between. The lifecycle knows only ``Suspend`` and
``SLEEPING``.
"""

from __future__ import annotations

from leasehold.durable import records, runs
from leasehold.durable.children import observe, repair
from leasehold.durable.runner import install_runner
from leasehold.lifecycle.app import Leasehold


def install(app: Leasehold) -> None:
    app.attempt_hooks.append(install_runner(app))
    app.store.observers.append(observe(app))
    # Children of a parent that ended while its process died before cancelling them.
    app.repairs["children"] = repair
    # A manual re-run counts a run: the callbacks an earlier run closed wait again.
    app.restarts.append(runs.restart)
    # A job's records live as long as its row: the relay removes them with it.
    app.removals.append(records.purge)
