"""moto's SQS clock, read cheaply in the embedded emulator.

moto's queue checks every message's visibility and delay by reading "now" through datetime
arithmetic (``moto.core.utils.unix_time_millis``: a naive UTC datetime minus the epoch), and
it does so for every message, several times per request. With a few hundred messages queued
that was most of the emulator's CPU for SQS: a receive of 10 took ~0.5 s and a send ~17 ms
in-process. The same instant, read as ``time.time()``, costs a fraction of that. Only the
calls without an explicit datetime (meaning "now") change; the value is the same clock
(:func:`install` is used by :func:`leasehold.local.emulator.serve`; a test compares both).

The emulator can also release delayed messages on a tick (:func:`install_delay_tick`), as
another SQS implementation does (LocalStack checks its delayed messages once a second): moto
releases one within milliseconds of its due time, which flatters any start-lateness figure
measured on it. AWS does not document its own precision.

A test clock can drive it instead (:func:`follow`, used by ``leasehold.testing``): moto's SQS
then reads "now" from that clock, so a ``DelaySeconds`` or a visibility timeout ends when the
test moves the clock past it, not in wall time.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

#: The test clock moto's SQS follows (epoch ms), while one does (:func:`follow`).
_followed: list[Callable[[], int]] = []


def _seconds_now() -> float:
    return _followed[-1]() / 1000 if _followed else time.time()


def _now_or(original: Callable[..., float], scale: float) -> Callable[..., float]:
    def read(dt: Any = None) -> float:
        return _seconds_now() * scale if dt is None else original(dt)

    return read


def install() -> None:
    """Point moto's SQS models at the cheap reading of "now" (idempotent)."""
    from moto.sqs import models

    patched: Any = models
    if getattr(patched, "_leasehold_clock", False):
        return
    patched.unix_time = _now_or(models.unix_time, 1.0)
    patched.unix_time_millis = _now_or(models.unix_time_millis, 1000.0)
    patched._leasehold_clock = True


#: ``LEASEHOLD_SQS_DELAY_TICK``: seconds between the emulator's releases of delayed messages
#: (0, the default: each is released when due).
DELAY_TICK_ENV = "LEASEHOLD_SQS_DELAY_TICK"


def install_delay_tick(tick_seconds: float) -> None:
    """Release each delayed message at the first tick (a whole multiple of ``tick_seconds``
    of the clock) at or after its due time, not when due: 0 to ``tick_seconds`` late."""
    if tick_seconds <= 0:
        return
    from moto.sqs import models

    tick_ms = tick_seconds * 1000
    original = models.Message.delay

    def delay(self: Any, delay_seconds: int) -> None:
        original(self, delay_seconds)
        self.delayed_until = math.ceil(self.delayed_until / tick_ms) * tick_ms

    models.Message.delay = delay  # type: ignore[method-assign]


def follow(now_ms: Callable[[], int]) -> None:
    """Make moto's SQS read "now" from ``now_ms`` (a test clock) until :func:`unfollow`.

    Under a clock that moves only when told, two more things change, both only while it is
    followed. A hand-off message (its body carries the job's ``run_at``) is released at that
    ``run_at`` to the millisecond: SQS delays are whole seconds, rounded down, and the
    worker would otherwise wait out the rest on the clock, moving it. And a receive never
    long-polls (``WaitTimeSeconds`` is taken as 0): its end would be on a clock that does not
    move while it waits.
    """
    install()
    from moto.sqs import models

    patched: Any = models
    if not getattr(patched, "_leasehold_follows", False):
        delay, receive = models.Message.delay, models.SQSBackend.receive_message

        def exact_delay(self: Any, delay_seconds: int) -> None:
            delay(self, delay_seconds)
            due = _run_at(self.body) if _followed else None
            if due is not None:
                self.delayed_until = max(self.delayed_until, due)

        def no_long_poll(self: Any, queue_name: str, count: int, wait_seconds_timeout: int,
                         *args: Any, **kwargs: Any) -> Any:
            wait = 0 if _followed else wait_seconds_timeout
            return receive(self, queue_name, count, wait, *args, **kwargs)

        models.Message.delay = exact_delay  # type: ignore[method-assign]
        models.SQSBackend.receive_message = no_long_poll  # type: ignore[method-assign]
        patched._leasehold_follows = True
    _followed.append(now_ms)


def unfollow(now_ms: Callable[[], int]) -> None:
    """Stop following ``now_ms``: moto's SQS reads the wall clock again."""
    if now_ms in _followed:
        _followed.remove(now_ms)


def _run_at(body: str) -> int | None:
    if '"run_at"' not in body:
        return None
    try:
        value = json.loads(body).get("run_at")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) else None


def receivable(queue_url: str, *, region: str) -> bool:
    """Whether a receive from this queue (in-process moto, by URL) would get a message now;
    True for a queue moto does not hold here (ask it)."""
    queue = _queue(queue_url, region)
    return queue is None or bool(queue.messages)


def _queue(url: str, region: str) -> Any:
    from moto.sqs.models import sqs_backends

    account, name = url.rstrip("/").split("/")[-2:]
    return sqs_backends[account][region].queues.get(name)


def next_release(queue_urls: Iterable[str], *, region: str) -> int | None:
    """The earliest time (epoch ms), after now by the followed clock, at which a message of
    these queues (in-process moto, by URL) becomes receivable: its delay ends, or its
    visibility timeout; None if no message waits for either."""
    now = _seconds_now() * 1000
    times = []
    for url in queue_urls:
        queue = _queue(url, region)
        for message in list(queue._messages) if queue is not None else ():
            if message.delayed_until > now:
                times.append(int(message.delayed_until))
            elif message.visible_at >= now:  # moto: visible once now > visible_at
                times.append(int(message.visible_at) + 1)
    return min(times, default=None)
