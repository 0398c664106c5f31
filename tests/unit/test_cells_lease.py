"""The Region lease, pure (leasehold.cells.lease): when a cell may work and must renew."""

from __future__ import annotations

import pytest

from leasehold.cells import lease
from leasehold.cells.lease import LeaseView

LEASE_MS, SKEW_MS = 30_000, 5_000


@pytest.mark.parametrize("view, now, holds", [
    (lease.NONE, 0, False),                                        # never held
    (LeaseView(epoch=1, valid_until=30_000, seen_at=0), 0, True),
    (LeaseView(epoch=1, valid_until=30_000, seen_at=0), 24_999, True),
    (LeaseView(epoch=1, valid_until=30_000, seen_at=0), 25_000, False),  # the skew given up
    (LeaseView(epoch=1, valid_until=30_000, seen_at=0), 40_000, False),
])
def test_a_cell_works_until_its_lease_ends_less_the_skew(view: LeaseView, now: int,
                                                         holds: bool) -> None:
    assert lease.holds(view, now, SKEW_MS) is holds


@pytest.mark.parametrize("seen_at, now, due", [
    (0, 9_999, False), (0, 10_000, True), (0, 29_000, True),
])
def test_a_lease_is_renewed_at_a_third_of_its_length(seen_at: int, now: int,
                                                     due: bool) -> None:
    view = LeaseView(epoch=1, valid_until=seen_at + LEASE_MS, seen_at=seen_at)
    assert lease.due_for_renewal(view, now, LEASE_MS) is due


def test_a_lease_is_measured_from_when_its_renewal_was_sent() -> None:
    # A renewal sent at 1,000 whose answer came at 9,000 holds until 31,000, not 39,000.
    assert lease.lease_end(1_000, LEASE_MS) == 31_000
    assert lease.fenced_within(LEASE_MS, SKEW_MS) == 25_000
