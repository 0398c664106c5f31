"""moto's SQS clock, read cheaply in the embedded emulator.

moto's queue checks every message's visibility and delay by reading "now" through datetime
arithmetic (``moto.core.utils.unix_time_millis``: a naive UTC datetime minus the epoch), and
it does so for every message, several times per request. With a few hundred messages queued
that was most of the emulator's CPU for SQS: a receive of 10 took ~0.5 s and a send ~17 ms
in-process. The same instant, read as ``time.time()``, costs a fraction of that. Only the
calls without an explicit datetime (meaning "now") change; the value is the same clock
(:func:`install` is used by :func:`leasehold.local.emulator.serve`; a test compares both).
"""

from __future__ import annotations

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
