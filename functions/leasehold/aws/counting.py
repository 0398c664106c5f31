"""Counting the AWS requests a process makes, by operation: what a job costs, measured.

Install a :class:`RequestCounter` on an app's clients (``counter.attach(app.clients)``) and
read ``counter.snapshot()`` before and after the work (a benchmark divides the difference by
the jobs it ran). Every call is counted once when it ends, with its retries (each one a
request AWS bills): ``requests`` counts every try, ``calls`` every call, and ``errors`` the
calls that ended in an error, by ``service.Operation code`` (``dynamodb.TransactWriteItems
TransactionCanceledException``: a refused condition or a conflict). Admission's own refusals
and contention are in ``errors`` too, so "transactions per admitted job" is
``requests["dynamodb.TransactWriteItems"]`` over the jobs admitted.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from leasehold.aws.clients import Clients


@dataclass(frozen=True)
class Counts:
    #: Requests sent (a call and each of botocore's retries of it), by ``service.Operation``.
    requests: Counter[str] = field(default_factory=Counter)
    #: API calls, by ``service.Operation``.
    calls: Counter[str] = field(default_factory=Counter)
    #: Calls that ended in an error, by ``service.Operation Code``.
    errors: Counter[str] = field(default_factory=Counter)

    def minus(self, earlier: Counts) -> Counts:
        return Counts(self.requests - earlier.requests, self.calls - earlier.calls,
                      self.errors - earlier.errors)

    def total(self, service: str | None = None) -> int:
        return sum(n for op, n in self.requests.items()
                   if service is None or op.startswith(service + "."))


class RequestCounter:
    """Counts the requests of the clients it is installed on; thread-safe."""

    def __init__(self) -> None:
        self._counts = Counts()
        self._lock = threading.Lock()

    def attach(self, clients: Clients) -> RequestCounter:
        """Count every client ``clients`` has built and will build."""
        clients.add_hook(self.install)
        return self

    def install(self, client: Any) -> Any:
        client.meta.events.register("after-call", self._after_call)
        return client

    def snapshot(self) -> Counts:
        with self._lock:
            return Counts(Counter(self._counts.requests), Counter(self._counts.calls),
                          Counter(self._counts.errors))

    def _after_call(self, http_response: Any, parsed: dict[str, Any], model: Any,
                    **_: Any) -> None:
        operation = f"{model.service_model.service_name}.{model.name}"
        tries = 1 + int((parsed.get("ResponseMetadata") or {}).get("RetryAttempts") or 0)
        code = (parsed.get("Error") or {}).get("Code")
        with self._lock:
            self._counts.requests[operation] += tries
            self._counts.calls[operation] += 1
            if code:
                self._counts.errors[f"{operation} {code}"] += 1
