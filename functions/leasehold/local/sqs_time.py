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
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any


def _now_or(original: Callable[..., float], scale: float) -> Callable[..., float]:
    def read(dt: Any = None) -> float:
        return time.time() * scale if dt is None else original(dt)

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
