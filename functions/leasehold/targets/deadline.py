"""A call's absolute deadline: at it, a timer shuts the call's socket.

A socket timeout bounds one ``recv``, and a server that trickles a byte before each one
expires resets it for ever (http.client's header ``readline`` included). The timer's
shutdown wakes the blocked read at the deadline, whatever the server sends.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

from leasehold.targets.failures import HttpTimeout


class Deadline:
    """The call's end: at it a timer shuts the call's socket, which ends a read blocked on
    a server that trickles (a socket timeout is reset by every byte)."""

    def __init__(self, ends: float) -> None:
        self.ends = ends
        self.passed = False
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._timer = threading.Timer(max(0.0, ends - time.monotonic()), self._cut)
        self._timer.daemon = True
        self._timer.start()

    def _cut(self) -> None:
        with self._lock:
            self.passed = True
            sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                # The plain socket's shutdown, also under TLS: it wakes a blocked recv.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def hold(self, sock: socket.socket) -> socket.socket:
        """``sock`` is the call's now: shut at the deadline (at once if it has passed)."""
        with self._lock:
            if not self.passed:
                self._sock = sock
                return sock
        sock.close()
        raise HttpTimeout("the call's timeout passed while connecting")

    def left(self) -> float:
        return self.ends - time.monotonic()

    def cancel(self) -> None:
        self._timer.cancel()
