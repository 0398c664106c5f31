"""Leasehold: a distributed job scheduler built only from AWS managed services."""

from leasehold.clock import advance
from leasehold.core.context import JobContext
from leasehold.core.enqueueing import enqueue_item
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import task
from leasehold.core.suspension import CallbackFailed, CallbackTimeout
from leasehold.errors import InvalidPayload, LeaseholdError, NonRetryableError

__all__ = ["CallbackFailed", "CallbackTimeout", "InvalidPayload", "JobContext",
           "LeaseholdError", "NonRetryableError", "RetryPolicy", "advance", "enqueue_item",
           "task"]
__version__ = "0.1.0"
