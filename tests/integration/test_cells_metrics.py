"""What a cell reports for the stack's failover alarms (issue 48, ``cdk/cell_alarms.py``): the
age of its Region lease at each try to renew it, growing while the control table is out of
reach, and each misdirected submission."""

from __future__ import annotations

import contextlib

import pytest

from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.errors import Fenced

from .api_client import api_for
from .cells_helpers import cell_of, control_table_for

pytestmark = pytest.mark.ddblocal


def test_the_lease_age_grows_while_renewals_fail_and_each_421_is_counted(
        make_app, registry, clock: FakeClock) -> None:  # type: ignore[no-untyped-def]
    registry.task("echo")(lambda payload, ctx: payload)
    a, b = make_app(), make_app()
    seen: list[tuple[str, float, str]] = []
    a.measures.append(lambda *measured: seen.append(measured))
    control = control_table_for(a)
    cell, injector = cell_of(a, "us-east-1", control)
    cell_b, _ = cell_of(b, "us-east-2", control)
    assert cell_b.renew()
    cell.guard(a, a.now())  # the first lease: age 0
    assert seen == [("RegionLeaseAgeMs", 0, "Milliseconds")]

    injector.faults.append(Fault(target="dynamodb.*", kind="throttle", times=None))
    ages = []
    for _ in range(4):  # a renewal due every 10 s fails each time
        clock.advance(10)
        seen.clear()
        with contextlib.suppress(Fenced):
            cell.guard(a, a.now())
        ages += [value for name, value, _ in seen if name == "RegionLeaseAgeMs"]
    assert ages == [10_000, 20_000, 30_000, 40_000]  # past 20 s the alarm fires

    seen.clear()
    assert api_for(b).post("/jobs", {"task": "echo", "payload": {}},
                           tenant="acme").status == 201  # acme is homed in us-east-2
    injector.faults.clear()
    clock.advance(10)
    assert api_for(a).post("/jobs", {"task": "echo", "payload": {}},
                           tenant="acme").status == 421
    assert ("MisdirectedSubmissions", 1, "Count") in seen
