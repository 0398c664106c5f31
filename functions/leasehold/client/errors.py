"""What the client raises: an API's refusal, a job that failed or was cancelled, a wait that
ran out. All are :class:`~leasehold.errors.LeaseholdError`, so one ``except`` catches them."""

from __future__ import annotations

from typing import Any

from leasehold.errors import InvalidInput, LeaseholdError, ValidationError


class ApiError(LeaseholdError):
    """The API refused the request, or could not be reached (``status`` 0)."""

    code = "api_error"

    def __init__(self, status: int, code: str, message: str, field: str | None = None,
                 retry_after: str | None = None) -> None:
        self.status, self.code, self.field, self.retry_after = status, code, field, retry_after
        #: The answer is to a request sent again after an earlier try that may have landed
        #: (its answer lost): a 409 or 404 may be that earlier try's own effect.
        self.repeated = False
        #: ``421 misdirected``: the tenant's home Region and its cell's API URL.
        self.home: str | None = None
        self.home_url: str | None = None
        # No HTTP status means no answer: say what happened, not "0 unreachable". Called by
        # name: a subclass below is also a ValidationError, whose own __init__ differs.
        LeaseholdError.__init__(self, f"{status} {code}: {message}" if status else message)


class InvalidRequest(ApiError, ValidationError):  # type: ignore[misc]  # field: str here
    """A 422 ``validation_error``: the API refused a value, named by ``field``. It is the
    same :class:`~leasehold.errors.ValidationError` an in-process submission raises, so one
    ``except ValidationError`` serves both paths."""


class InvalidPayloadInput(InvalidRequest, InvalidInput):  # type: ignore[misc]
    """A 422 on the payload (``field`` ``payload`` or ``payload.…``): the payload does not
    fit its task's input model, :class:`~leasehold.errors.InvalidInput` as in-process."""


def api_error(status: int, code: str, message: str, field: str | None = None,
              retry_after: str | None = None) -> ApiError:
    """The error for an API's answer: :class:`InvalidRequest` (or
    :class:`InvalidPayloadInput`) for a 422 ``validation_error``, else :class:`ApiError`."""
    kind = ApiError
    if status == 422 and code == "validation_error":
        on_payload = field is not None and (field == "payload" or field.startswith("payload."))
        kind = InvalidPayloadInput if on_payload else InvalidRequest
        field = field or ""  # a ValidationError always names a field ("": the request)
    return kind(status, code, message, field, retry_after)


class JobFailed(LeaseholdError):
    """The job ended DEAD: its last error, with the worker's traceback text."""

    code = "job_failed"

    def __init__(self, job: dict[str, Any]) -> None:
        error = job.get("error") or {}
        self.job = job
        self.job_id: str = job.get("job_id", "")
        self.type: str = error.get("type", "Error")
        self.message: str = error.get("message", "")
        #: The traceback as the worker formatted it (empty for the scheduler's own errors,
        #: such as a timeout).
        self.remote_traceback: str = error.get("traceback", "")
        text = f"job {self.job_id} failed: {self.type}: {self.message}"
        if self.remote_traceback:
            text += f"\n\nRemote traceback:\n{self.remote_traceback.rstrip()}"
        super().__init__(text)


class Cancelled(LeaseholdError):
    """The job was cancelled before it finished."""

    code = "cancelled"

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        super().__init__(f"job {job.get('job_id')} was cancelled")


class Expired(LeaseholdError):
    """The job was not started within its start window: it never ran."""

    code = "expired"

    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        super().__init__(f"job {job.get('job_id')} expired before it started")


class ResultTimeout(LeaseholdError, TimeoutError):
    """The job did not finish within the time given to ``result()``."""

    code = "result_timeout"

    def __init__(self, job: dict[str, Any], timeout: float) -> None:
        self.job = job
        super().__init__(f"job {job.get('job_id')} is still {job.get('state')} after "
                         f"{timeout:g} s")
