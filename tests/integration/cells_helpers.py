"""Cells for tests: apps of several Regions sharing one control table."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from leasehold.aws.faults import Fault, FaultInjector
from leasehold.cells import Cell, ControlTable
from leasehold.cells import install as install_cells
from leasehold.cells.cell import control_client
from leasehold.cells.control import create_control_table
from leasehold.lifecycle.app import Leasehold

MakeCell = Callable[..., tuple[Leasehold, Cell]]


def control_table_for(app: Leasehold) -> ControlTable:
    """A fresh control table next to ``app``'s tables (the operator's view of it)."""
    name = f"control-{uuid.uuid4().hex[:8]}"
    client = control_client(app.settings)
    create_control_table(client, name)
    return ControlTable(client, name)


def cell_of(app: Leasehold, region: str, control: ControlTable,
            *faults: Fault) -> tuple[Cell, FaultInjector]:
    """Make ``app`` the cell of ``region``, its control-table calls (only those) open to
    ``faults`` (add more to the injector's ``faults`` list later)."""
    injector = FaultInjector(list(faults))  # botocore's own backoff: its retries end
    settings = app.settings.with_(cell_region=region, control_table=control.table,
                                  cell_url=f"https://{region}.leasehold.test",
                                  region_lease_seconds=30.0, control_cache_seconds=5.0)
    app.settings = settings
    cell = Cell.for_settings(settings, app.clock, faults=injector)
    install_cells(app, cell)
    return cell, injector
