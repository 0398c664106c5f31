"""Reading the secret a ``secret_header`` names, at run time, through Powertools' parameters.

The deployment names each secret (``http_secrets``: ``secretsmanager:<id>`` or
``ssm:<name>``); a job names only the deployment's name for it, so a row, a result, an event
or a log never holds a value. Values are cached per worker for :data:`MAX_AGE_SECONDS`
(Powertools' cache), so a burst of calls costs one read, and a rotation is seen within it.

(Issue 31 builds the runtime's reading of the pool's secrets through the same utility; the
two readers are one concern and should become one module when both have landed.)
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from aws_lambda_powertools.utilities.parameters import SecretsProvider, SSMProvider

from leasehold.aws.clients import Clients
from leasehold.targets.config import TargetConfig
from leasehold.targets.failures import TargetFailed

MAX_AGE_SECONDS = 60
#: botocore logs whole requests and response bodies at DEBUG (``Response body:``), so a
#: secret's value with them: while this thread reads a secret, these loggers' records are
#: dropped.
_BODY_LOGGERS = ("botocore.parsers", "botocore.endpoint")
_reading = threading.local()


class _WhileReading(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_reading, "active", False)


for _name in _BODY_LOGGERS:
    logging.getLogger(_name).addFilter(_WhileReading())


class SecretUnavailable(TargetFailed):
    """The secret a header names could not be read."""


class SecretReader:
    """``read(name)``: the value of the deployment's secret ``name``."""

    def __init__(self, config: TargetConfig, clients: Clients) -> None:
        self._config = config
        self._clients = clients
        self._providers: dict[str, Any] = {}

    def _provider(self, kind: str) -> Any:
        if kind not in self._providers:
            if kind == "secretsmanager":
                self._providers[kind] = SecretsProvider(
                    boto3_client=self._clients.client("secretsmanager"))
            else:
                self._providers[kind] = SSMProvider(boto3_client=self._clients.client("ssm"))
        return self._providers[kind]

    def read(self, name: str) -> str:
        _reading.active = True
        try:
            return self._read(name)
        finally:
            _reading.active = False

    def _read(self, name: str) -> str:
        where = self._config.secrets.get(name)
        if where is None:
            raise SecretUnavailable(f"the deployment names no secret {name!r}")
        kind, _, ident = where.partition(":")
        try:
            if kind == "ssm":
                value = self._provider(kind).get(ident, decrypt=True, max_age=MAX_AGE_SECONDS)
            else:
                value = self._provider(kind).get(ident, max_age=MAX_AGE_SECONDS)
        except Exception as exc:
            # The exception's text names the secret's id, never its value.
            raise SecretUnavailable(f"secret {name!r} could not be read: "
                                    f"{type(exc).__name__}") from None
        if isinstance(value, bytes):
            value = value.decode()
        return str(value)
