"""Declared failover and failback: what ``leasehold cells failover`` and ``failback`` do.

Failover fences the Region it leaves (its epoch bumped: its cell's next renewal is refused,
and a cell cut off stops when its lease runs out) and re-homes its tenants, each with its
epoch bumped, so their new work is accepted in the new home. Jobs acknowledged in the old
Region stay there and wait for it (fail-static: nothing lost, nothing run twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from leasehold.cells.control import ControlTable, Home, RegionRecord
from leasehold.errors import ValidationError


@dataclass(frozen=True)
class Failover:
    #: The Region left, fenced, at its bumped epoch.
    fenced: RegionRecord
    #: The tenants re-homed, at their new epochs.
    moved: tuple[Home, ...]

    @property
    def stopped_by(self) -> int:
        """When (ms, by the old cell's clock) the old cell surely stopped working, if it is
        cut off and never saw the failover: the end of the last lease it wrote."""
        return self.fenced.lease_until


def failover(control: ControlTable, *, source: str, to: str, now: int,
             tenants: Sequence[str] = ()) -> Failover:
    """Fence ``source`` and re-home its tenants (or only ``tenants``) to ``to``."""
    if source == to:
        raise ValidationError("to", f"the failover's target must differ from {source}")
    fenced = control.fence(source, now)
    chosen = set(tenants)
    moved = tuple(control.move_home(home.tenant, to, now, epoch=home.epoch, origin=source)
                  for home in list(control.homes())
                  if home.region == source and (not chosen or home.tenant in chosen))
    return Failover(fenced=fenced, moved=moved)


def failback(control: ControlTable, *, region: str, now: int,
             tenants: Sequence[str] = ()) -> tuple[RegionRecord, tuple[Home, ...]]:
    """Let ``region``'s cell take its lease again and re-home to it the tenants a failover
    moved from it (or only ``tenants``)."""
    record = control.restore(region)
    chosen = set(tenants)
    moved = tuple(control.move_home(home.tenant, region, now, epoch=home.epoch)
                  for home in list(control.homes())
                  if home.region != region and
                  (home.tenant in chosen if chosen else home.origin == region))
    return record, moved
