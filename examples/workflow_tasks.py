"""Example workflow steps (README "Workflows").

Load them with ``leasehold dev --tasks examples.tasks,examples.workflow_tasks``.
"""

from __future__ import annotations

from typing import Any

from leasehold import JobContext, task
from leasehold.workflows import step_results


@task("add-inputs")
def add_inputs(payload: Any, ctx: JobContext) -> int:
    """Its payload (a number, default 0) plus the results of the steps it depends on."""
    total = int(payload or 0)
    for result in step_results(ctx).values():
        total += int(result or 0)
    return total
