"""The emulator's cheap SQS clock reads the same instant as moto's, and only for "now"."""

from __future__ import annotations

import datetime
import time

import pytest
from moto.core.utils import unix_time, unix_time_millis
from moto.sqs import models

from leasehold.local import sqs_time


def test_now_is_moto_s_now_and_explicit_datetimes_are_moto_s(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "unix_time", models.unix_time)
    monkeypatch.setattr(models, "unix_time_millis", models.unix_time_millis)
    # Undone after the test whether or not it was there: a flag left set would keep a later
    # install() (the test clock's) from patching moto's "now" again.
    monkeypatch.setattr(models, "_leasehold_clock", False, raising=False)
    sqs_time.install()
    assert models.unix_time is not unix_time  # really replaced
    before = unix_time_millis()
    fast = models.unix_time_millis()
    after = unix_time_millis()
    assert before - 1 <= fast <= after + 1
    assert unix_time() - 0.01 <= models.unix_time() <= unix_time() + 0.01
    moment = datetime.datetime(2026, 11, 22, 10, 0, 0, 123000)
    assert models.unix_time_millis(moment) == unix_time_millis(moment)
    assert models.unix_time(moment) == unix_time(moment)
    assert abs(models.unix_time() - time.time()) < 0.01
