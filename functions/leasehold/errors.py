"""Domain errors. Each docstring is the message; context rides along as attributes.

The HTTP edge maps these to statuses in one place (``leasehold.api.errors``); nothing
else in the library should know about HTTP.
"""

from __future__ import annotations


class LeaseholdError(Exception):
    """Leasehold failed."""

    code = "error"

    def __init__(self, message: str | None = None, **context: object) -> None:
        self.context = context
        super().__init__(message or (self.__doc__ or "").strip())


class ValidationError(LeaseholdError):
    """A value is invalid."""

    code = "validation_error"

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}", field=field)


class PayloadTooLarge(ValidationError):
    """A payload or result is larger than allowed."""

    code = "payload_too_large"


class InvalidInput(ValidationError):
    """The payload does not fit its task's input model (``@task(..., input=Model)``)."""


class NotFound(LeaseholdError):
    """No such job."""

    code = "not_found"


class Conflict(LeaseholdError):
    """The request conflicts with the current state."""

    code = "conflict"


class IdempotencyConflict(Conflict):
    """The idempotency key was already used for a different job spec."""

    code = "idempotency_conflict"


class InvalidTransition(Conflict):
    """That state change is not allowed."""

    code = "invalid_transition"


class StaleMessage(LeaseholdError):
    """The message no longer matches the job (duplicate or superseded hand-off)."""

    code = "stale_message"


class LeaseLost(LeaseholdError):
    """The lease was taken over or the job changed; this worker's result is discarded."""

    code = "lease_lost"


class JobCancelled(LeaseholdError):
    """The job was cancelled while it ran."""

    code = "cancelled"


class AttemptTimeout(LeaseholdError):
    """The attempt ran past its timeout."""

    code = "attempt_timeout"


class NonRetryableError(LeaseholdError):
    """Raise from a task to fail the job at once, without retries."""

    code = "non_retryable"


class InvalidPayload(NonRetryableError):
    """The job's payload does not have the shape its task needs; no retry can fix it."""

    code = "invalid_payload"


class InvalidResult(NonRetryableError):
    """The handler's result does not fit its task's output model; no retry can fix it."""

    code = "invalid_result"


class RateLimited(LeaseholdError):
    """Too many requests; retry later."""

    code = "rate_limited"

    def __init__(self, message: str | None = None, *, retry_after: float = 1.0) -> None:
        self.retry_after = retry_after
        super().__init__(message, retry_after=retry_after)


class Overloaded(RateLimited):
    """The scheduler's backlog is full; retry later."""

    code = "overloaded"


class Misdirected(LeaseholdError):
    """This cell is not the tenant's home Region: submit there."""

    code = "misdirected"

    def __init__(self, tenant: str, *, home: str, url: str | None) -> None:
        self.home = home
        self.url = url
        super().__init__(f"tenant {tenant!r} is homed in {home}: submit there"
                         + (f" ({url})" if url else ""), home=home, url=url)


class Fenced(LeaseholdError):
    """This cell does not hold its Region lease: it neither leases nor finishes jobs, nor
    accepts new ones, until it holds it again."""

    code = "cell_fenced"
