"""The ticker's leader lease as ``leasehold dev`` holds it: saying when it leads or stands by."""

from __future__ import annotations

import logging
import os
import socket
from typing import TextIO

from leasehold.lifecycle.app import Leasehold
from leasehold.time.leader import LeaderLease

log = logging.getLogger(__name__)


class AnnouncedLease(LeaderLease):
    """The ticker's leader lease, saying when this runtime gains or loses it.

    An error reaching DynamoDB counts as not holding the lease (we cannot know that we still
    do), and never ends the ticker loop: the next tick tries again.
    """

    def __init__(self, app: Leasehold, *, lease_seconds: float, out: TextIO) -> None:
        super().__init__(app, "ticker", owner=f"{socket.gethostname()}-{os.getpid()}",
                         lease_seconds=lease_seconds)
        self.out = out
        self.leading: bool | None = None

    def acquire(self) -> bool:
        try:
            leading = super().acquire()
        except Exception:
            log.exception("could not renew the ticker's leader lease; not ticking")
            leading = False
        if leading != self.leading:
            self.leading = leading
            if leading:
                message = f"ticker: leading (lease held by {self.owner})"
            else:
                message = "ticker: standing by (another ticker holds the leader lease)"
            print(message, file=self.out, flush=True)
        return leading

    def release(self) -> None:
        try:
            super().release()
        except Exception:
            log.warning("could not release the ticker's leader lease; it expires by itself",
                        exc_info=True)
