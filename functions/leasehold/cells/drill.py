"""Where a local drill's cells are: ``<state-dir>/regions.json``, written by ``leasehold dev
--regions`` (:mod:`leasehold.local.regions`) and read by ``leasehold regions isolate``,
``reconnect``, ``show``, ``failover`` and ``failback`` (which find the local control table
there when none is named). Plain files and JSON only: the CLI reads it without the local
runtime.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from leasehold.aws.isolation import IsolationSwitch
from leasehold.errors import LeaseholdError

LAYOUT = "regions.json"
CONTROL_TABLE = "leasehold-control"


class RegionsUnavailable(LeaseholdError):
    """No ``leasehold dev --regions`` runs on this state directory."""


@dataclass(frozen=True)
class Layout:
    """What ``<state-dir>/regions.json`` says: the running Regions and the control table."""

    pid: int
    control_endpoint: str
    control_table: str
    #: Region -> its API URL.
    urls: dict[str, str]
    #: Region -> its isolation file.
    switches: dict[str, str]

    def switch(self, region: str) -> IsolationSwitch:
        if region not in self.switches:
            raise RegionsUnavailable(f"no Region {region!r} here; the Regions are "
                                     f"{', '.join(self.switches)}")
        return IsolationSwitch(self.switches[region])

    def write(self, directory: Path) -> None:
        (directory / LAYOUT).write_text(json.dumps(vars(self), indent=2) + "\n")


def layout(state_dir: str | Path) -> Layout:
    """The running ``leasehold dev --regions`` on ``state_dir``, or :class:`RegionsUnavailable`."""
    path = Path(state_dir) / LAYOUT
    try:
        found = Layout(**json.loads(path.read_text()))
    except FileNotFoundError:
        raise RegionsUnavailable(f"no `leasehold dev --regions` on {Path(state_dir)} (no "
                                 f"{path}); start one, or name the state dir "
                                 "(--state-dir)") from None
    try:
        os.kill(found.pid, 0)
    except ProcessLookupError:
        raise RegionsUnavailable(f"the `leasehold dev --regions` of {path} (pid {found.pid}) "
                                 "is not running") from None
    except PermissionError:
        pass  # alive, someone else's
    return found
