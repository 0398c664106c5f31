"""Leasehold: a distributed job scheduler built only from AWS managed services."""

from leasehold.clock import advance
from leasehold.core.context import JobContext
from leasehold.core.enqueueing import enqueue_item
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import install_submitter, task
from leasehold.core.suspension import CallbackFailed, CallbackTimeout
from leasehold.errors import InvalidPayload, LeaseholdError, NonRetryableError

__all__ = ["CallbackFailed", "CallbackTimeout", "InvalidPayload", "JobContext",
           "LeaseholdError", "NonRetryableError", "RetryPolicy", "advance", "enqueue_item",
           "task"]
__version__ = "0.1.0"


def _submit(name: str, payload: object = None, **options: object) -> object:
    """``task.submit(...)`` in a plain script, with no ``import leasehold.client`` first: the
    client is imported on the first submission (it installs its own submitter then), so a
    worker that only runs tasks never loads it."""
    from leasehold.client import _submit as submit

    return submit(name, payload, **options)


install_submitter(_submit)
