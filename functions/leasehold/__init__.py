"""Leasehold: a distributed job scheduler built only from AWS managed services."""

from leasehold.context import JobContext
from leasehold.errors import LeaseholdError, NonRetryableError
from leasehold.policy import RetryPolicy
from leasehold.registry import task

__all__ = ["JobContext", "LeaseholdError", "NonRetryableError", "RetryPolicy", "task"]
__version__ = "0.1.0"
