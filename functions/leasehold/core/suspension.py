"""How a durable handler ends its attempt without failing, and what the worker needs of it.

A handler suspends by raising :class:`Suspend` from ``ctx.sleep``, ``cb.wait()`` or
``ctx.wait_for``. It derives from :class:`BaseException`, as asyncio's ``CancelledError``
does, so that ``except Exception:`` in user code cannot swallow it: a swallowed suspension
would run the rest of the handler on a job that believes it is asleep. The worker treats it
as "end the attempt, put the job to sleep until ``wake_at``" (``lifecycle/worker.py``);
everything else about durable execution lives in :mod:`leasehold.durable`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from leasehold.errors import LeaseholdError, NonRetryableError


@dataclass(frozen=True, kw_only=True)
class Sleep:
    """What a suspension asks of the worker."""

    #: When the job must run again at the latest (UTC epoch ms): the end of a sleep, a
    #: callback's timeout, the next look at children that may have been missed.
    wake_at: int
    #: What it waits for, shown on the job: ``sleep``, ``callback:<name>``, ``children``.
    waiting: str
    #: ``TransactWriteItems`` entries committed with the job's move to SLEEPING; if one of
    #: their conditions fails (the callback was completed, a child finished meanwhile) the
    #: job is not put to sleep but runs again at once, so no wake-up is ever lost.
    also: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


class Suspend(BaseException):
    """Raised inside a handler to end its attempt without failing and sleep until
    ``sleep.wake_at``. Never catch it (``except Exception:`` does not)."""

    def __init__(self, sleep: Sleep) -> None:
        super().__init__(f"suspended until {sleep.wake_at} ({sleep.waiting})")
        self.sleep = sleep


class CallbackTimeout(LeaseholdError):
    """The callback was not completed before its timeout."""


class CallbackFailed(LeaseholdError):
    """The callback was completed with an error (``POST /callbacks/{token}/fail``)."""


class Durable(Protocol):
    """What ``JobContext``'s durable methods delegate to (installed per attempt by
    :mod:`leasehold.durable`)."""

    def step(self, name: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...
    def sleep_for(self, seconds: float) -> None: ...
    def sleep_until(self, when_ms: int) -> None: ...
    def callback(self, name: str, timeout_seconds: float) -> Any: ...
    def spawn(self, name: str, task: str, payload: Any, options: Mapping[str, Any]) -> str: ...
    def wait_for(self, job_ids: Sequence[str]) -> list[dict[str, Any]]: ...
    def patched(self, change: str) -> bool: ...
    def deprecate_patch(self, change: str) -> None: ...
    def finished(self) -> None: ...


class DurableMisuse(NonRetryableError):
    """A durable call the rules refuse (a step name used twice in one execution, a result
    too large, too many steps): every attempt would do it again, so it is not retried."""


class NonDeterministic(NonRetryableError):
    """A replay of the job met a durable call that its history does not have at that place
    (a step renamed, reordered or removed since the history was written). The attempt stopped
    before returning a stored result to the wrong call; deploy code that makes the recorded
    calls (branch new code with ``ctx.patched``) and retry the job."""
