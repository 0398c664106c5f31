"""`leasehold regions` (issue 48's name) and `leasehold cells` (its first) are one group."""

from __future__ import annotations

import pytest

from leasehold.cli import parser


@pytest.mark.parametrize("name", ["regions", "cells"])
def test_both_names_run_the_same_failover(name: str) -> None:
    args = parser().parse_args([name, "failover", "--from", "us-east-1", "--to", "us-east-2",
                                "--tenant", "acme", "--control-table", "control"])
    assert args.run.__name__ == "run_failover"
    assert (args.source, args.to, args.tenants) == ("us-east-1", "us-east-2", ["acme"])
