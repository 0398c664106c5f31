"""Reading the secret a ``secret_header`` names, at run time, through Powertools' parameters.

The deployment names each secret (``http_secrets``: ``secretsmanager:<id>`` or
``ssm:<name>``); a job names only the deployment's name for it, so a row, a result, an event
or a log never holds a value. The reading itself is the pools' own (``leasehold.aws.secrets``:
cached providers, botocore's body logging quiet while a value is read); values are cached per
worker for :data:`MAX_AGE_SECONDS`, so a burst of calls costs one read, and a rotation is
seen within it.
"""

from __future__ import annotations

from leasehold.aws.clients import Clients
from leasehold.aws.secrets import SecretReference, SecretsLoader
from leasehold.targets.config import TargetConfig
from leasehold.targets.failures import TargetFailed

MAX_AGE_SECONDS = 60


class SecretUnavailable(TargetFailed):
    """The secret a header names could not be read."""


class SecretReader:
    """``read(name)``: the value of the deployment's secret ``name``."""

    def __init__(self, config: TargetConfig, clients: Clients) -> None:
        self._config = config
        self._loader = SecretsLoader(clients, max_age=MAX_AGE_SECONDS)

    def read(self, name: str) -> str:
        where = self._config.secrets.get(name)
        if where is None:
            raise SecretUnavailable(f"the deployment names no secret {name!r}")
        kind, _, ident = where.partition(":")
        try:
            return self._loader.read(SecretReference("ssm" if kind == "ssm" else
                                                     "secretsmanager", ident))
        except Exception as exc:
            # The exception's text names the secret's id, never its value.
            raise SecretUnavailable(f"secret {name!r} could not be read: "
                                    f"{type(exc).__name__}") from None
