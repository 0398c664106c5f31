"""A Region taken off and brought back while its cell runs (``leasehold regions isolate``).

``LEASEHOLD_FAULTS=isolate`` takes a process's Region off for good, from its start. A drill
wants more: take a running cell's Region off, watch the others carry on, bring it back. So
each cell of ``leasehold dev --regions`` is started with ``LEASEHOLD_ISOLATE_FILE``, a path
that its API process and every worker it starts watch. While the file exists, every AWS call
of the cell (its jobs tables, queues and control table alike) is refused, or hangs when the
file says ``hang``, at the botocore layer (:func:`leasehold.aws.faults.switched`): the
call never reaches the emulator, as a Region cut off from the network. The cell's API
answers 503 (``local.gateway.isolating``). Removing the file brings the Region back.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

ENV = "LEASEHOLD_ISOLATE_FILE"
MODES = ("fail", "hang")


class IsolationSwitch:
    """The file at ``path``: absent, the Region is on; present, off (``fail`` or ``hang``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def mode(self) -> str | None:
        """``fail`` or ``hang`` while the Region is off, else None (read at every call: one
        small file read, so a switch flipped by another process counts at once)."""
        try:
            text = self.path.read_text().strip()
        except OSError:  # absent (or unreadable): the Region is on
            return None
        return text if text in MODES else "fail"

    def set(self, mode: str = "fail") -> None:
        if mode not in MODES:
            raise ValueError(f"an isolation is {' or '.join(MODES)}, not {mode!r}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial")
        partial.write_text(mode)
        partial.replace(self.path)  # whole or not at all: a reader never sees it half-written

    def clear(self) -> bool:
        """Bring the Region back; whether it was off."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True


def switch_from(env: Mapping[str, str]) -> IsolationSwitch | None:
    path = env.get(ENV, "").strip()
    return IsolationSwitch(path) if path else None
