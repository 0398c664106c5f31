"""``leasehold dev``'s change-stream relay: a thread that hands off enqueued jobs and publishes
job state events from the jobs table's stream, as the deployed stack's relay function does.

It begins at the stream's end (``LATEST``): a runtime that loaded its saved state wrote every
kept row again, and those writes are not changes to announce. Its checkpoint is
``relay.json`` in the state directory; a relay that fails mid-batch reads the batch again
from it. The workers are started after the relay has its place in the stream, so no change
of theirs is missed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from leasehold.events.publishing import FileSink, sink_for
from leasehold.lifecycle.app import Leasehold
from leasehold.streams import poller

CHECKPOINT = "relay.json"
#: How long a start waits for the relay to hold its place in the stream.
READY_SECONDS = 30.0


class LocalRelay:
    """The relay thread, started (through ``thread``) and returned once it holds its place in
    the stream; :meth:`finish` makes its last pass once the workers have stopped."""

    def __init__(self, app: Leasehold, directory: Path,
                 thread: Callable[[Callable[[], None], str], None]) -> None:
        self.done = threading.Event()
        self.stopped = threading.Event()
        sink = sink_for(app) or FileSink("/dev/null")
        ready = threading.Event()
        checkpoint = poller.Checkpoint(directory / CHECKPOINT)

        def body() -> None:
            try:
                poller.run(app, sink, checkpoint, self.done, start="LATEST", ready=ready)
            finally:
                self.stopped.set()

        thread(body, "relay")
        if not ready.wait(READY_SECONDS):
            raise RuntimeError("the change-stream relay could not open the jobs table's "
                               f"stream in {READY_SECONDS:g} s (does this DynamoDB serve "
                               "streams?)")

    def finish(self, timeout: float = 10.0) -> None:
        """Stop after one last pass (call it once no worker writes any more)."""
        self.done.set()
        self.stopped.wait(timeout)
