"""How a target's call fails, as the job records it: the error type says what happened.

A non-success HTTP status fails with the status as its type (``HTTP503``), built once per
status; 4xx other than 408 and 429 (and any other status outside the target's success) is
never retried; 5xx, 408, 429 and network errors are, under the job's retry policy. A
failure may carry its next attempt's time (``retry_at_ms``, from ``Retry-After``): the
worker reads it through :func:`leasehold.core.failures.describe`.
"""

from __future__ import annotations

from functools import cache

from leasehold.errors import LeaseholdError, NonRetryableError

RETRIED_STATUSES = (408, 429)


class TargetFailed(LeaseholdError):
    """The target's call failed."""

    code = "target_failed"
    #: When the next attempt may start (UTC epoch ms), if the failure says (Retry-After).
    retry_at_ms: int | None = None


class HttpStatusError(TargetFailed):
    """The target answered with a status outside its success."""

    status: int = 0


class HttpNetworkError(TargetFailed):
    """The target could not be reached, or the connection broke."""


class HttpTimeout(HttpNetworkError):
    """The target did not answer within the call's timeout_seconds."""


class AddressRefused(NonRetryableError):
    """The target's address may not be reached (private, loopback, link-local, ...)."""

    code = "address_refused"


class SecretRefused(TargetFailed, NonRetryableError):
    """The secret a header names may not be sent on this call (its origin, its value)."""

    code = "secret_refused"


class RequestRefused(TargetFailed, NonRetryableError):
    """The request could not be sent as given (http.client refused a header)."""


class AwsCallError(TargetFailed):
    """The AWS action failed."""


def retried(status: int) -> bool:
    return status >= 500 or status in RETRIED_STATUSES


@cache
def status_error(status: int) -> type[HttpStatusError]:
    """The error class ``HTTP{status}``: retried or not by its bases, matchable by name in a
    retry policy's ``non_retryable``."""
    bases: tuple[type, ...] = (HttpStatusError,) if retried(status) else \
        (HttpStatusError, NonRetryableError)
    return type(f"HTTP{status}", bases, {"status": status, "__module__": __name__,
                                         "__doc__": f"The target answered {status}."})


@cache
def aws_error(code: str, retry: bool) -> type[AwsCallError]:
    """The error class named by an AWS error code (``InvalidParameter``)."""
    name = code if code.isidentifier() else "AwsError"
    bases: tuple[type, ...] = (AwsCallError,) if retry else (AwsCallError, NonRetryableError)
    return type(name, bases, {"__module__": __name__, "__doc__": f"AWS answered {code}."})
