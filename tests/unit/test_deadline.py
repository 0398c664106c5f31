"""Waiting for a call only until a deadline on a given clock, and batches that follow the call."""

from __future__ import annotations

import contextvars
import threading

import pytest

from leasehold.clock import FakeClock
from leasehold.lifecycle.deadline import Overdue, call_before
from leasehold.lifecycle.deferral import Deferred


def test_a_call_that_answers_in_time_gives_its_result_or_its_error() -> None:
    clock = FakeClock()
    deadline = clock.now_ms() + 1000
    assert call_before(clock, deadline, lambda: 42, name="t") == 42

    def refused() -> int:
        raise LookupError("refused")

    with pytest.raises(LookupError, match="refused"):
        call_before(clock, deadline, refused, name="t")


def test_a_hung_call_is_left_behind_when_the_deadline_passes_by_the_given_clock() -> None:
    clock = FakeClock()
    release, started = threading.Event(), threading.Event()

    def hung() -> str:
        started.set()
        release.wait(30)
        return "late"

    def the_clock_moves_on() -> None:
        started.wait(5)
        clock.advance(1.0)  # exactly the deadline: the lease has run out

    threading.Thread(target=the_clock_moves_on, daemon=True).start()
    with pytest.raises(Overdue):
        call_before(clock, clock.now_ms() + 1000, hung, name="t")
    assert not release.is_set()  # the call was still hung when the caller went on
    release.set()


def test_nothing_is_called_once_the_deadline_has_passed() -> None:
    clock = FakeClock()
    calls: list[int] = []
    with pytest.raises(Overdue):
        call_before(clock, clock.now_ms(), lambda: calls.append(1), name="t")
    assert calls == []


def test_a_call_handed_to_a_helper_joins_its_callers_batch_and_a_late_one_acts_at_once(
) -> None:
    flushed: list[list[str]] = []
    deferred: Deferred[str] = Deferred(flushed.append)
    clock = FakeClock()
    kept: list[bool] = []
    late: list[bool] = []
    release = threading.Event()
    with deferred.batch():
        call_before(clock, clock.now_ms() + 1000, lambda: kept.append(deferred.add("in time")),
                    name="t")
        assert kept == [True] and flushed == []  # kept for the batch, not sent
        # A call abandoned at its deadline that adds only after the batch ended.
        context = contextvars.copy_context()
        helper = threading.Thread(target=lambda: (
            release.wait(5), late.append(context.run(deferred.add, "late"))))
        helper.start()
    assert flushed == [["in time"]]
    release.set()
    helper.join(5)
    assert late == [False]  # the batch is over: the caller acts on it at once
    assert flushed == [["in time"]]
