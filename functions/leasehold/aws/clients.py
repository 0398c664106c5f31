"""The one factory for boto3 clients. Clients are built lazily, never at import time.

boto3 itself honours ``AWS_ENDPOINT_URL``; we pass the endpoint explicitly as well so that
a :class:`~leasehold.settings.Settings` built in code (tests, the local runtime) wins.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config

from leasehold.aws.faults import FaultInjector
from leasehold.aws.faults import from_env as faults_from_env
from leasehold.settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

# "standard" retries back off on throttling (ProvisionedThroughputExceededException,
# ThrottlingException) and transient 5xx; our own code only decides what a failed
# *condition* means.
_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 8},
    connect_timeout=5,
    read_timeout=30,
    max_pool_connections=32,
)
# One try, no retry: for a write that must land at most once and is not idempotent (a
# tenant's slot given back: ``leasehold.tenancy.slots``). Whoever calls it decides which
# errors prove the write did not land (a throttle) and may be tried again.
_ONCE = _CONFIG.merge(Config(retries={"mode": "standard", "total_max_attempts": 1},
                             read_timeout=5))


class Clients:
    """Lazily built, thread-safe boto3 clients for one set of settings."""

    def __init__(self, settings: Settings, session: boto3.Session | None = None, *,
                 faults: FaultInjector | None = None) -> None:
        self.settings = settings
        self._session = session
        #: Injected faults (tests, or ``LEASEHOLD_FAULTS`` in the local runtime), if any.
        self.faults = faults if faults is not None else faults_from_env()
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._hooks: list[Callable[[Any], Any]] = []

    def add_hook(self, hook: Callable[[Any], Any]) -> None:
        """Call ``hook(client)`` on every client, built already or later (a request counter,
        :class:`leasehold.aws.counting.RequestCounter`)."""
        with self._lock:
            self._hooks.append(hook)
            built = list(self._clients.values())
        for client in built:
            hook(client)

    def client(self, service: str, *, once: bool = False) -> Any:
        """The client of ``service``; ``once``: one that never retries a call (see
        ``_ONCE``)."""
        name = f"{service}#once" if once else service
        with self._lock:
            if name not in self._clients:
                session = self._session or boto3.session.Session()
                client = session.client(
                    service,  # type: ignore[call-overload]
                    region_name=self.settings.region,
                    endpoint_url=self.settings.endpoint_url,
                    config=_ONCE if once else _CONFIG,
                )
                if self.faults is not None:
                    self.faults.install(client)
                for hook in self._hooks:
                    hook(client)
                self._clients[name] = client
            return self._clients[name]

    @property
    def dynamodb(self) -> DynamoDBClient:
        return self.client("dynamodb")

    @property
    def sqs(self) -> SQSClient:
        return self.client("sqs")
