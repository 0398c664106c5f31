"""Whether the caller of the request being answered has gone (hung up on a long poll).

The server in front of the API handler says so, if it can: the local gateway sets
:data:`CLIENT_GONE` for each request to a check of its connection. A lease that finds its
caller gone hands back what it leased at once (:func:`leasehold.remote.leasing.hand_back`),
without counting an attempt or a crash. Behind API Gateway nothing can tell: a Lambda
integration is never told that the client hung up, so a job leased then stays RUNNING
until its lease ends and the sweeper takes it over (docs/protocol.md, "Stopping during a
long poll": a worker stops between polls, or with a short ``wait_seconds``).
"""

from __future__ import annotations

import select
import socket
from collections.abc import Callable
from contextvars import ContextVar

Gone = Callable[[], bool]

#: The check of the current request's connection; None where nothing can tell.
CLIENT_GONE: ContextVar[Gone | None] = ContextVar("leasehold_client_gone", default=None)


def client_gone() -> Gone | None:
    """The current request's check (None: the caller cannot be watched)."""
    return CLIENT_GONE.get()


def closed(connection: socket.socket) -> bool:
    """Whether the peer closed ``connection``: it reads as ready and a peek finds its end
    (a pipelined next request is data, not an end)."""
    try:
        ready, _, _ = select.select([connection], [], [], 0)
        if not ready:
            return False
        return connection.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


__all__ = ["CLIENT_GONE", "Gone", "client_gone", "closed"]
