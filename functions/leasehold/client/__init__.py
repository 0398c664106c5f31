"""The Python client for application code.

>>> from leasehold.client import Client
>>> job = Client().submit("echo", {"hi": 1})      # $LEASEHOLD_URL, or the local runtime
>>> job.result(timeout=30)                        # {'hi': 1}

Importing it also makes ``send_email.submit(payload, **options)`` work on every ``@task``
function, with the default client (:func:`default_client`, :func:`set_default_client`).
It imports no AWS SDK: botocore is loaded only to sign (``aws_auth=True``).
"""

from __future__ import annotations

import threading
from typing import Any

from leasehold.client.aio import AsyncClient, AsyncJobHandle
from leasehold.client.client import Client
from leasehold.client.errors import (
    ApiError,
    Cancelled,
    Expired,
    InvalidPayloadInput,
    InvalidRequest,
    JobFailed,
    ResultTimeout,
)
from leasehold.client.handle import JobHandle
from leasehold.client.transport import HttpRetries, set_default_transport
from leasehold.core.registry import install_submitter

_default: list[Client] = []
_lock = threading.Lock()


def default_client() -> Client:
    """The client ``task.submit(...)`` uses: ``Client()`` (``$LEASEHOLD_URL``,
    ``$LEASEHOLD_TENANT``) unless :func:`set_default_client` gave another."""
    with _lock:
        if not _default:
            _default.append(Client())
        return _default[0]


def set_default_client(client: Client | None) -> None:
    """Use ``client`` for ``task.submit(...)`` (None: build one from the environment again)."""
    with _lock:
        _default[:] = [] if client is None else [client]


def _submit(name: str, payload: Any = None, **options: Any) -> JobHandle:
    return default_client().submit(name, payload, **options)


install_submitter(_submit)

__all__ = [
    "ApiError",
    "AsyncClient",
    "AsyncJobHandle",
    "Cancelled",
    "Client",
    "Expired",
    "HttpRetries",
    "InvalidPayloadInput",
    "InvalidRequest",
    "JobFailed",
    "JobHandle",
    "ResultTimeout",
    "default_client",
    "set_default_client",
    "set_default_transport",
]
