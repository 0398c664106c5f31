"""Workflows: multi-step jobs with dependencies, fan-out and fan-in (see README "Workflows").

Each step is a job row (WAITING until its dependencies are done); the workflow item in its
own table records outcomes and the overall state. ``graph`` holds the pure DAG checks,
``model`` the spec and record, ``storage`` the conditional writes, ``start`` the submission,
``progress`` how steps move the workflow on, ``reconcile`` the repair pass, ``control``
get/list/cancel, ``tree`` the text rendering and ``inputs`` what a step receives.
"""

from leasehold.workflows.control import (
    WorkflowDetail,
    cancel_workflow,
    get_workflow,
    list_workflows,
)
from leasehold.workflows.inputs import step_inputs, step_results
from leasehold.workflows.model import (
    FailurePolicy,
    StepSpec,
    Workflow,
    WorkflowSpec,
    WorkflowState,
    parse_workflow,
)
from leasehold.workflows.progress import install
from leasehold.workflows.reconcile import ReconcileReport, reconcile, reconcile_workflow
from leasehold.workflows.start import Started, start_prepared, start_workflow

__all__ = [
    "FailurePolicy", "ReconcileReport", "Started", "StepSpec", "Workflow", "WorkflowDetail",
    "WorkflowSpec", "WorkflowState", "cancel_workflow", "get_workflow", "install",
    "list_workflows", "parse_workflow", "reconcile", "reconcile_workflow", "start_prepared",
    "start_workflow",
    "step_inputs", "step_results",
]
