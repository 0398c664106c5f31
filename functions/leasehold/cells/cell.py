"""This cell's view of the control table: its Region lease and its tenants' homes, cached.

Nothing here is on a job's path but :meth:`Cell.guard`, which answers from memory; once a
third of the lease has passed since the last renewal the one thread that comes first renews
it (one conditional write to the control table per cell process every ~10 s, never per job).
A renewal that fails (the control table cut off, throttled, hung) leaves the last lease in
force until it runs out; a refused one (the Region was failed over) fences the cell at once.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from leasehold.aws.faults import FaultInjector, isolates, parse, switched
from leasehold.cells import lease
from leasehold.cells.control import ControlTable, Home, LeaseRefused, RegionRecord, RegionState
from leasehold.clock import Clock
from leasehold.errors import Fenced, Misdirected
from leasehold.lifecycle.app import Leasehold
from leasehold.settings import Settings

log = logging.getLogger(__name__)

#: The control client gives up fast: a call that hangs must not hold a worker thread (or a
#: submission) for the jobs tables' 30 s read timeout. Two tries of at most ~2 s each.
_CONTROL_CONFIG = Config(retries={"mode": "standard", "max_attempts": 2},
                         connect_timeout=1, read_timeout=1)


def control_client(settings: Settings, faults: FaultInjector | None = None) -> Any:
    """A DynamoDB client for the control table's replica (``LEASEHOLD_CONTROL_REGION``, else
    this cell's Region), with ``faults`` (else ``LEASEHOLD_CONTROL_FAULTS``, or
    ``LEASEHOLD_FAULTS=isolate`` or ``LEASEHOLD_ISOLATE_FILE``: the whole Region off)
    installed; at ``LEASEHOLD_CONTROL_ENDPOINT`` when set (``leasehold dev --regions``: the
    control table on an emulator of its own), else the cell's endpoint."""
    client = boto3.session.Session().client(
        "dynamodb", region_name=settings.control_region or settings.region,
        endpoint_url=settings.control_endpoint or settings.endpoint_url,
        config=_CONTROL_CONFIG)
    spec = os.environ.get("LEASEHOLD_CONTROL_FAULTS", "").strip()
    every = os.environ.get("LEASEHOLD_FAULTS", "")
    if not spec and isolates(every):
        spec = every
    # `leasehold regions isolate` (LEASEHOLD_ISOLATE_FILE) takes the control table off too.
    chosen = [*parse(spec), *switched(os.environ)]
    if faults is None and chosen:
        faults = FaultInjector(chosen)
    if faults is not None:
        faults.install(client)
    return client


#: The metrics a cell reports (``Leasehold.measures``) for the stack's alarms
#: (``cdk/cell_alarms.py``).
LEASE_AGE_METRIC = "RegionLeaseAgeMs"
MISDIRECTED_METRIC = "MisdirectedSubmissions"


class Cell:
    """One Region's cell: holds its Region lease and knows its tenants' homes."""

    def __init__(self, *, region: str, control: ControlTable, clock: Clock,
                 lease_seconds: float = 30.0, cache_seconds: float = 5.0,
                 skew_seconds: float = 5.0, url: str | None = None) -> None:
        self.region = region
        self.control = control
        self.clock = clock
        self.url = url or None
        self.lease_ms = int(lease_seconds * 1000)
        self.cache_ms = int(cache_seconds * 1000)
        self.skew_ms = min(int(skew_seconds * 1000), self.lease_ms // 3)
        self.view = lease.NONE
        self._last_try: int | None = None
        self._first_try: int | None = None
        self._renewing = threading.Lock()
        self._homes: dict[str, tuple[Home | None, int]] = {}
        self._regions: dict[str, tuple[RegionRecord | None, int]] = {}

    @classmethod
    def for_settings(cls, settings: Settings, clock: Clock, *,
                     faults: FaultInjector | None = None) -> Cell:
        return cls(region=settings.cell_region,
                   control=ControlTable(control_client(settings, faults),
                                        settings.control_table),
                   clock=clock, lease_seconds=settings.region_lease_seconds,
                   cache_seconds=settings.control_cache_seconds,
                   skew_seconds=settings.skew_grace_seconds, url=settings.cell_url)

    # -- the Region lease --------------------------------------------------------------

    def lease_age(self, now: int) -> int:
        """Time (ms) since this cell last renewed its Region lease (or first tried to)."""
        since = self.view.seen_at if self.view.epoch else (self._first_try or now)
        return max(0, now - since)

    def holds(self, now: int) -> bool:
        return lease.holds(self.view, now, self.skew_ms)

    def renew(self) -> bool:
        """Renew the Region lease now; True while the cell holds it. A failover (the
        Region fenced, its epoch bumped) fences the cell at once; an error keeps the last
        lease until it runs out."""
        sent = self.clock.now_ms()
        self._last_try = sent
        if self._first_try is None:
            self._first_try = sent
        until = lease.lease_end(sent, self.lease_ms)
        try:
            try:
                record = self.control.renew(self.region, epoch=self.view.epoch,
                                            lease_until=until, url=self.url, now=sent)
            except LeaseRefused:
                current = self.control.region(self.region)
                if current is None or current.state is RegionState.FENCED or \
                        current.epoch == self.view.epoch:
                    raise
                # A process new to the lease, or a failback (the Region active again at the
                # epoch its failover bumped): take the lease at the current epoch.
                record = self.control.renew(self.region, epoch=current.epoch,
                                            lease_until=until, url=self.url, now=sent)
        except LeaseRefused:
            if self.view.epoch:
                log.warning("cell %s: the Region was failed over; fenced", self.region)
            self.view = lease.NONE
            return False
        except (ClientError, BotoCoreError) as exc:
            log.warning("cell %s: the Region lease was not renewed (%s); it holds until %d",
                        self.region, exc, self.view.valid_until)
            return self.holds(self.clock.now_ms())
        self.view = lease.LeaseView(epoch=record.epoch, valid_until=until, seen_at=sent)
        return True

    def guard(self, app: Leasehold | None, now: int) -> None:
        """Raise :class:`Fenced` unless this cell holds its Region lease (``work_guards``);
        renews it first when it is due, in one thread at a time and at most once per
        cache period while renewals fail."""
        if lease.due_for_renewal(self.view, now, self.lease_ms) and \
                (self._last_try is None or now - self._last_try >= self.cache_ms) and \
                self._renewing.acquire(blocking=False):
            try:
                self.renew()
            finally:
                self._renewing.release()
            if app is not None:
                # The alarm's metric: how old the lease this cell works on is, at each try
                # to renew it (only a working cell tries: an idle one reports nothing).
                app.measure(LEASE_AGE_METRIC, self.lease_age(self.clock.now_ms()),
                            "Milliseconds")
        if not self.holds(self.clock.now_ms()):
            raise Fenced(f"cell {self.region} does not hold its Region lease",
                         region=self.region)

    # -- tenants' homes ----------------------------------------------------------------

    def _cached(self, cache: Mapping[str, tuple[Any, int]], key: str, now: int) -> tuple[bool, Any]:
        entry = cache.get(key)
        if entry is not None and now - entry[1] < self.cache_ms:
            return True, entry[0]
        return False, entry[0] if entry is not None else None

    def home_of(self, tenant: str, now: int) -> Home:
        """``tenant``'s home, read at most once per cache period; a tenant with none is
        homed here (one conditional put decides between cells)."""
        fresh, home = self._cached(self._homes, tenant, now)
        if fresh and home is not None:
            return home
        try:
            home = self.control.home(tenant) or self.control.claim_home(tenant, self.region, now)
        except (ClientError, BotoCoreError):
            if home is None:
                raise Fenced(f"cell {self.region} cannot read tenant {tenant!r}'s home",
                             region=self.region) from None
            # The control table is out of reach: the last home read stands while this
            # cell holds its lease (the caller checked), at most the lease's length.
            return home
        self._homes[tenant] = (home, now)
        return home

    def url_of(self, region: str, now: int) -> str | None:
        fresh, record = self._cached(self._regions, region, now)
        if not fresh:
            try:
                record = self.control.region(region)
            except (ClientError, BotoCoreError):
                pass  # the answer still names the Region
            else:
                self._regions[region] = (record, now)
        return record.url if record is not None else None

    def admit(self, app: Leasehold | None, tenant: str, now: int) -> None:
        """Refuse new work this cell must not take: :class:`Fenced` without the Region
        lease, :class:`Misdirected` (the home's name and URL) for a tenant homed elsewhere."""
        self.guard(app, now)
        home = self.home_of(tenant, now)
        if home.region != self.region:
            if app is not None:
                app.measure(MISDIRECTED_METRIC, 1)
            raise Misdirected(tenant, home=home.region, url=self.url_of(home.region, now))


def install(app: Leasehold, cell: Cell | None = None) -> Cell | None:
    """Make ``app`` a cell (when ``LEASEHOLD_CELL_REGION`` is set, or ``cell`` is given):
    no lease or finish without the Region lease, no new work for tenants homed elsewhere."""
    if cell is None:
        if not app.settings.cell_region:
            return None
        cell = Cell.for_settings(app.settings, app.clock)
    app.work_guards.append(cell.guard)
    app.front_doors.append(cell.admit)
    return cell
