"""Waiting for a call no longer than a deadline on the worker's own clock.

A call hung on a socket holds its thread for as long as botocore lets it (30 s read timeout,
times its retries). Nothing in Python can stop that thread, so the call runs on a helper
thread of its own and the caller waits for it only until the deadline: then the caller goes
on, and the call is abandoned (whatever it does later, nobody waits for it).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from leasehold.clock import Clock

T = TypeVar("T")

#: How often the wait looks at the clock (the deadline is on the app's clock, which a test
#: may move by hand, so the wait cannot simply sleep until it).
POLL_SECONDS = 0.05


class Overdue(Exception):
    """The deadline passed before the call returned (it may still be running)."""


def call_before(clock: Clock, deadline_ms: int, call: Callable[[], T], *, name: str) -> T:
    """``call()``'s result or exception, if it comes before ``deadline_ms`` by ``clock``.

    Raises :class:`Overdue` when the deadline passes first, and without calling at all when
    it has passed already. The call runs in a copy of the caller's context, so it belongs to
    the batch its caller is in (``lifecycle/deferral.py``).
    """
    if clock.now_ms() >= deadline_ms:
        raise Overdue(name)
    outcome: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome["result"] = context.run(call)
        except BaseException as exc:  # handed to the caller, crashes included
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=name, daemon=True).start()
    while not done.wait(min(POLL_SECONDS, max(0.0, (deadline_ms - clock.now_ms()) / 1000))):
        if clock.now_ms() >= deadline_ms and not done.is_set():
            raise Overdue(name)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]
