"""Turning an exception into the error a job records."""

from __future__ import annotations

import traceback

from leasehold.core.jobs import JobError

MAX_MESSAGE = 2_000
MAX_TRACEBACK = 4_000


def describe(exc: BaseException) -> JobError:
    """The error a job records for ``exc``. An exception with an integer ``retry_at_ms``
    attribute (UTC epoch ms) carries its own next-attempt time (:func:`retry_at`)."""
    types = tuple(cls.__name__ for cls in type(exc).__mro__ if cls not in (object, BaseException))
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return JobError(
        type=type(exc).__name__,
        message=str(exc)[:MAX_MESSAGE],
        traceback=text[-MAX_TRACEBACK:],
        types=types,
        retry_at_ms=retry_at(exc),
    )


def retry_at(exc: BaseException) -> int | None:
    """The next-attempt time ``exc`` carries (``retry_at_ms``), or None to use the backoff."""
    value = getattr(exc, "retry_at_ms", None)
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def error(type_name: str, message: str) -> JobError:
    """An error the scheduler itself records (timeouts, lost workers)."""
    return JobError(type=type_name, message=message[:MAX_MESSAGE], types=(type_name,))


def deadline_exceeded(message: str) -> JobError:
    """The job's ``deadline_seconds`` passed (before an attempt, or during one): it ends
    DEAD, never retried, since every later attempt would start past it too."""
    return JobError(type="DeadlineExceeded", message=message[:MAX_MESSAGE],
                    types=("DeadlineExceeded", "NonRetryableError"))


def unfit_result(exc: BaseException) -> JobError:
    """A handler's result that cannot be stored (too large, or not JSON): the error under
    its own name (``PayloadTooLarge``, as the API names the same limit at submit), never
    retried, since every attempt would return it again."""
    described = describe(exc)
    return JobError(type=described.type, message=f"the handler's result: {exc}"[:MAX_MESSAGE],
                    types=(*described.types, "NonRetryableError"))
