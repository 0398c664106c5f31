"""Cells (issue 48): schedules and triggers fire only in their tenant's home cell.

A schedule or a trigger lives in the cell it was created in, which was the tenant's home
then. After the tenant moves (a failover, or a failback that leaves it where it went), the
old cell's ticker and trigger dispatch leave it alone, so a copy re-created in the new home
never fires beside it; when the tenant comes back, it fires again.
"""

from __future__ import annotations

import pytest

from leasehold.cells.failover import failback, failover
from leasehold.clock import FakeClock
from leasehold.events import triggers
from leasehold.lifecycle.app import Leasehold
from leasehold.time import schedules
from leasehold.time.ticker import tick

from .api_client import api_for
from .cells_helpers import cell_of, control_table_for

pytestmark = pytest.mark.ddblocal

A, B = "us-east-1", "us-east-2"


@pytest.fixture
def two_cells(make_app, registry) -> tuple[Leasehold, Leasehold]:  # type: ignore[no-untyped-def]
    registry.task("report")(lambda payload, ctx: payload)
    return make_app(), make_app()


def test_a_schedule_fires_only_while_its_tenant_is_homed_in_its_cell(
        two_cells: tuple[Leasehold, Leasehold], clock: FakeClock) -> None:
    a, b = two_cells
    control = control_table_for(a)
    cell_a, _ = cell_of(a, A, control)
    cell_b, _ = cell_of(b, B, control)
    assert cell_a.renew() and cell_b.renew()
    created = api_for(a).post("/schedules", {"task": "report", "cron": "* * * * *"},
                              tenant="acme")  # acme's first new work homes it in A
    assert created.status == 201, created.body
    schedule_id = created.body["schedule_id"]
    clock.advance(61)
    assert tick(a, lookahead_seconds=0).fired == 1

    # Failed over: A is fenced, its ticker fires nothing.
    failover(control, source=A, to=B, now=a.now())
    clock.advance(61)
    fenced = tick(a, lookahead_seconds=0)
    assert (fenced.fired, fenced.away) == (0, 1)

    # A comes back but acme stays in B: A holds its lease, and still leaves acme's
    # schedule alone (acme would re-create it in B; both must not fire).
    failback(control, region=A, now=a.now(), tenants=["nobody"])
    assert cell_a.renew()
    clock.advance(61)
    moved = tick(a, lookahead_seconds=0)
    assert (moved.fired, moved.away) == (0, 1)
    stored = schedules.get(a, schedule_id)
    assert stored.run_count == 1

    # acme is moved back: the schedule fires again, in A, under its misfire policy.
    failback(control, region=A, now=a.now(), tenants=["acme"])
    clock.advance(6)  # A's cached home of acme expires
    back = tick(a, lookahead_seconds=0)
    assert back.fired >= 1 and back.away == 0
    assert schedules.get(a, schedule_id).run_count > 1


def test_a_trigger_fires_only_while_its_tenant_is_homed_in_its_cell(
        two_cells: tuple[Leasehold, Leasehold], clock: FakeClock) -> None:
    a, b = two_cells
    control = control_table_for(a)
    cell_a, _ = cell_of(a, A, control)
    cell_b, _ = cell_of(b, B, control)
    assert cell_a.renew() and cell_b.renew()
    made = api_for(a).post("/triggers", {"task": "report", "pattern": {"source": ["shop"]}},
                           tenant="acme")
    assert made.status == 201, made.body
    # The trigger handler (EventBridge's delivery) names no tenant: every trigger matches.
    assert len(triggers.dispatch(a, {"id": "e-1", "source": "shop"})) == 1

    failover(control, source=A, to=B, now=a.now())
    failback(control, region=A, now=a.now(), tenants=["nobody"])
    assert cell_a.renew()
    clock.advance(6)
    assert triggers.dispatch(a, {"id": "e-2", "source": "shop"}) == []

    failback(control, region=A, now=a.now(), tenants=["acme"])
    clock.advance(6)
    assert len(triggers.dispatch(a, {"id": "e-3", "source": "shop"})) == 1
