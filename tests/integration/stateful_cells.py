"""The state machine's cell rules (issue 48): the machine's app is a cell of Region ``a`` on
a control table it shares with a cell ``b`` that is never asked to work.

One rule plays a Region's loss in one step, at a random point of an example: ``a`` is
isolated (every control-table call refused) or failed over to ``b`` while reachable (its
epoch bumped, its tenants re-homed); the machine's clock passes the Region lease; a worker
takes a batch; then ``a`` comes back (failback: its tenants homed there again, its lease
taken at the bumped epoch). Checked in the step: the cell fences itself (its guard
refuses), and while fenced it grants no lease and records no finish. The machine's own
checks, after the step and at the drain, hold the rest: nothing acknowledged is lost (every
job still ends), none succeeds twice, every lease is fenced by a newer epoch.

Registered by :func:`join` (one line in ``test_stateful.py``): the rules join the machine
class as the swarm group ``cells``, and their checks join ``stateful_fired.CHECKS``.
"""

from __future__ import annotations

import contextlib
import tempfile
import uuid
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from hypothesis import strategies as st
from hypothesis.stateful import rule

from leasehold.aws.faults import Fault, FaultInjector, switched
from leasehold.aws.isolation import ENV as ISOLATE_ENV
from leasehold.aws.isolation import IsolationSwitch
from leasehold.cells import Cell, ControlTable
from leasehold.cells import install as install_cells
from leasehold.cells.cell import control_client
from leasehold.cells.control import create_control_table
from leasehold.cells.failover import failback, failover
from leasehold.errors import Fenced
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.worker import Worker
from tests.integration import stateful_fired
from tests.integration.stateful_fired import fire

A, B = "a", "b"
CHECKS = (
    "a cell cut off or failed over fences itself (an episode)",
    "a fenced cell grants no lease and records no finish (a batch it refused)",
    "a cell isolated while it runs has every call refused and fences itself (an episode)",
)


class CellRules:
    """Mixed into the lifecycle machine; uses its ``app``, ``clock``, ``url``, ``succeeded``,
    ``grants`` and ``failed``."""

    app: Any
    clock: Any
    injector: Any
    url: str
    succeeded: Any
    grants: Any
    failed: Any

    def _cell(self) -> tuple[Cell, ControlTable, FaultInjector]:
        """Make the machine's app the cell of ``a`` (once per example)."""
        made = getattr(self, "_cells", None)
        if made is None:
            settings = self.app.settings
            control = ControlTable(control_client(settings), f"ctl-{uuid.uuid4().hex[:8]}")
            create_control_table(control.client, control.table)
            settings = settings.with_(cell_region=A, control_table=control.table,
                                      cell_url="https://a.leasehold.test",
                                      region_lease_seconds=30.0, control_cache_seconds=5.0)
            self.app.settings = settings
            injector = FaultInjector([])
            cell = Cell.for_settings(settings, self.app.clock, faults=injector)
            install_cells(self.app, cell)
            assert cell.renew()
            # b holds its own lease, so a failover has somewhere to send a's tenants.
            control.renew(B, epoch=0, lease_until=self.app.now() + 3_600_000,
                          url="https://b.leasehold.test", now=self.app.now())
            made = self._cells = (cell, control, injector)
        return made

    @rule(isolated=st.booleans(), deliver=st.booleans())
    def a_region_lost_failed_over_and_failed_back(self, isolated: bool, deliver: bool) -> None:
        cell, control, injector = self._cell()
        if isolated:  # cut off: every control-table call of a's refused
            injector.faults.append(Fault(target="dynamodb.*", kind="fail", times=None))
        else:  # reachable, failed over: its next renewal is refused
            failover(control, source=A, to=B, now=self.app.now())
        self.clock.advance(cell.lease_ms / 1000 + 1)
        with contextlib.suppress(Fenced):
            cell.guard(self.app, self.app.now())
            raise AssertionError("a cell past its lease (or failed over) still works")
        fire(CHECKS[0])
        if deliver:
            succeeded, grants = sum(self.succeeded.values()), sum(map(len,
                                                                      self.grants.values()))
            batch = self.app.queues.receive(self.url, max_messages=5)
            with contextlib.suppress(*self.failed):
                consume(Worker(self.app), batch)
            assert sum(self.succeeded.values()) == succeeded
            assert sum(map(len, self.grants.values())) == grants
            fire(CHECKS[1], bool(batch))
        # a comes back: its tenants homed there again, its lease at the bumped epoch.
        injector.faults.clear()
        if not isolated:
            failback(control, region=A, now=self.app.now())
        assert cell.renew()
        cell.guard(self.app, self.app.now())

    @rule()
    def a_running_region_isolated_and_reconnected(self) -> None:
        """``leasehold regions isolate`` on a running cell (its ``LEASEHOLD_ISOLATE_FILE``):
        the switch flips; every call of the cell, jobs tables, queues and control table, is
        refused at once, and the cell fences itself within its lease; reconnected (not
        failed over), it takes its lease again at the same epoch."""
        cell, _control, injector = self._cell()
        epoch = cell.view.epoch
        succeeded, grants = sum(self.succeeded.values()), sum(map(len, self.grants.values()))
        with tempfile.TemporaryDirectory() as directory:
            switch = IsolationSwitch(Path(directory) / "isolated")
            data, ctl = switched({ISOLATE_ENV: str(switch.path)}), \
                switched({ISOLATE_ENV: str(switch.path)})
            self.injector.faults.extend(data)
            injector.faults.extend(ctl)
            try:
                switch.set("fail")
                with contextlib.suppress(ClientError):
                    self.app.queues.receive(self.url, max_messages=5)
                    raise AssertionError("an isolated cell still received messages")
                self.clock.advance(cell.lease_ms / 1000 + 1)
                with contextlib.suppress(Fenced):
                    cell.guard(self.app, self.app.now())
                    raise AssertionError("an isolated cell past its lease still works")
                assert sum(self.succeeded.values()) == succeeded
                assert sum(map(len, self.grants.values())) == grants
                fire(CHECKS[2])
            finally:
                switch.clear()
                for fault in data:
                    self.injector.faults.remove(fault)
                for fault in ctl:
                    injector.faults.remove(fault)
        self.clock.advance(cell.cache_ms / 1000)  # its next try to renew
        assert cell.renew()
        assert cell.view.epoch == epoch
        cell.guard(self.app, self.app.now())


def join(machine: type, groups: dict[str, tuple[type, ...]]) -> None:
    """Add the cell rules to ``machine`` as the swarm group ``cells`` (before the machine's
    swarm gives each group's rules their precondition)."""
    for name, value in vars(CellRules).items():
        if not name.startswith("__"):
            setattr(machine, name, value)
    groups["cells"] = (CellRules,)
    stateful_fired.CHECKS = (*stateful_fired.CHECKS, *CHECKS)
