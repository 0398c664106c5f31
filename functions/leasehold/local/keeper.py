"""The state directory of one ``leasehold dev``: held alone, saved soon after every change,
and honest about what an unclean stop lost.

- **One runtime per directory.** Two runtimes on one ``state.json`` both loaded it, both ran
  its jobs and each overwrote the other's saves. The keeper holds an ``fcntl`` lock on
  ``runtime.lock`` for as long as the runtime lives, and a second one refuses to start,
  naming the first one's PID. The kernel drops the lock when its process dies, so a runtime
  that was killed leaves nothing that blocks the next start.
- **Saved within a second or so of a change.** Once a second (``every``) the keeper asks the
  emulator for a cut unless nothing was written since the last one (one small local request
  when idle); so work accepted or finished is in the file about a second later, not up to a
  minute. A save that takes long (large tables) spaces the next one out, so saving takes at
  most about a tenth of the time (the cut holds the emulator's DynamoDB lock while it copies).
- **An unclean stop is said.** Every save but the last one of a clean stop is marked
  unclean; a start that loads such a file says that the previous run did not stop cleanly,
  when it last saved, and what that means.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TextIO

from leasehold.lifecycle.app import Leasehold
from leasehold.local import state

log = logging.getLogger(__name__)
LOCK_FILE = "runtime.lock"
#: At most this share of the time is spent saving (a slow save waits longer for the next).
_SAVING_SHARE = 0.1


class StateInUse(RuntimeError):
    """Another ``leasehold dev`` is running on this state directory."""


class StateKeeper:
    def __init__(self, directory: Path, *, every: float, out: TextIO) -> None:
        self.directory = directory
        self.every = every
        self.out = out
        self._lock: IO[str] | None = None
        self._saving = threading.Lock()
        #: The cut the file holds (None: the file is not ours yet, so never skip a save).
        self._sequence: int | None = None
        #: Set once the saved state is loaded: a runtime whose load failed must not write its
        #: empty tables over the file it could not read.
        self._app: Leasehold | None = None

    def lock(self) -> None:
        """Hold the directory for this process, or raise :class:`StateInUse`."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / LOCK_FILE
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held until release)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise StateInUse(
                f"another `leasehold dev` (pid {holder}) is running on the state directory "
                f"{self.directory}; stop it, or give this one its own --state-dir") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._lock = handle

    def release(self) -> None:
        if self._lock is not None:
            self._lock.close()  # closing drops the flock
            self._lock = None

    def load(self, app: Leasehold) -> int:
        """Load the saved tables (saying if the run that saved them did not stop cleanly),
        then save at once: from here on the file is this run's, marked unclean until it
        stops."""
        loaded = state.load(app, self.directory)
        if loaded.clean is False:
            print(self.unclean_notice(loaded.saved_at), file=self.out, flush=True)
        self._app = app
        self.save()
        return loaded.items

    def unclean_notice(self, saved_at: datetime | None) -> str:
        when = "at an unknown time"
        if saved_at is not None:
            ago = (datetime.now(UTC) - saved_at).total_seconds()
            when = f"at {saved_at:%Y-%m-%d %H:%M:%S} UTC ({ago:.0f}s ago)"
        return (f"WARNING: the previous `leasehold dev` on {self.directory} did not stop "
                f"cleanly (it was killed or crashed). Its last save was {when}: work "
                "accepted after that is lost, work that finished after it may run again, "
                "and jobs it was running run again once their leases expire.")

    def save(self, *, final: bool = False) -> state.Saved | None:
        """Save if anything changed since the last save (always if ``final``, marked clean);
        None if nothing was saved (or nothing loaded yet)."""
        if self._app is None:
            return None
        with self._saving:  # the autosave and the final save never write the file together
            saved = state.save(self._app, self.directory, clean=final,
                               unless=None if final else self._sequence)
            if saved is not None:
                self._sequence = saved.sequence
            return saved

    def run(self, stopping: threading.Event) -> None:
        """Save soon after every change until ``stopping`` is set."""
        wait = self.every
        while not stopping.wait(wait):
            started = time.monotonic()
            try:
                saved = self.save()
            except Exception:
                log.exception("could not save the local state; trying again")
                saved = None
            took = time.monotonic() - started
            wait = max(self.every, took / _SAVING_SHARE) if saved else self.every

    def close(self) -> None:
        """The last save, marked clean; then the directory is free for the next runtime."""
        try:
            saved = self.save(final=True)
        except Exception:
            log.exception("could not save the local state")
            print(f"Could not save the state to {self.directory}.", file=self.out, flush=True)
            saved = None
        self.release()
        if saved is not None:
            print(f"Saved {saved.items} item(s) to {self.directory / state.STATE_FILE}; "
                  "`leasehold dev` loads them next time (--fresh starts empty).",
                  file=self.out, flush=True)
