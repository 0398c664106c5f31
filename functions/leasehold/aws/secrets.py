"""A worker pool's secrets: read at cold start into the process environment, never written.

The CDK construct (``PoolConfig(secrets={"API_KEY": "billing/stripe"})``) puts only the
*references* in the pool's environment, as JSON in :data:`SECRETS_VAR`; the values are read
here, through Powertools' parameters utility, before the task modules are imported
(the Lambda worker handler and ``leasehold worker`` call :func:`apply` first). Each value
then is an ordinary environment variable to the task code (``os.environ["API_KEY"]``).

A reference is spelled:

* ``ssm:/path/name`` (or an SSM parameter ARN): an SSM Parameter Store parameter, read with
  decryption (a ``SecureString``);
* anything else: a Secrets Manager secret, by name or ARN (its ``SecretString``).

Values are cached for :data:`MAX_AGE_SECONDS`: the Lambda worker calls :func:`apply` on
every invocation, which reads again only once the cache has expired, so a rotated secret
reaches warm functions within that time. A read that fails after a value was set keeps the
old value (logged by variable name); a first read that fails raises
:class:`SecretUnavailable`, naming the variable and the reference, never a value. Throttling
is retried by the client's standard retries (:mod:`leasehold.aws.clients`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from aws_lambda_powertools.utilities.parameters import SecretsProvider, SSMProvider
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

from leasehold.aws.clients import Clients
from leasehold.errors import LeaseholdError, ValidationError
from leasehold.settings import Settings

log = logging.getLogger(__name__)

#: The pool's references, ``{"ENV_NAME": "reference", ...}`` as JSON (set by the construct).
SECRETS_VAR = "LEASEHOLD_SECRETS"
#: How long a value read is used before it is read again (rotation reaches warm workers).
MAX_AGE_SECONDS = 300
#: The prefix that names an SSM parameter rather than a Secrets Manager secret.
SSM_PREFIX = "ssm:"
#: An environment variable name as Lambda accepts it.
ENV_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_ARN = re.compile(r"^arn:[a-z-]+:(?P<service>[a-z0-9-]+):")

Store = Literal["secretsmanager", "ssm"]


#: botocore logs every response body at DEBUG (``Response body: ...``): with debug logging on
#: (``leasehold worker -v``, a function's log level) a secret's value would be in the log.
#: Its loggers drop their records while this thread reads a secret.
QUIET_LOGGERS = ("botocore.parsers", "botocore.endpoint")
_reading = threading.local()


class _QuietWhileReading(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_reading, "active", False)


_QUIET = _QuietWhileReading()
for _name in QUIET_LOGGERS:
    logging.getLogger(_name).addFilter(_QUIET)


@contextmanager
def _quiet() -> Iterator[None]:
    _reading.active = True
    try:
        yield
    finally:
        _reading.active = False


class SecretUnavailable(LeaseholdError):
    """A secret of this worker pool could not be read."""

    code = "secret_unavailable"


@dataclass(frozen=True)
class SecretReference:
    """Where one environment variable's value is kept."""

    store: Store
    #: A secret's name or ARN, or a parameter's name or ARN (what the read is given).
    name: str


def reference(value: str) -> SecretReference:
    """The store and name a reference spells (see the module docstring); raises
    :class:`~leasehold.errors.ValidationError` for an empty or unknown one."""
    value = value.strip()
    if value.startswith(SSM_PREFIX):
        name = value[len(SSM_PREFIX):].strip()
        if not name:
            raise ValidationError("secrets", f"{value!r} names no SSM parameter")
        return SecretReference("ssm", name)
    if not value:
        raise ValidationError("secrets", "a secret reference is empty")
    if (match := _ARN.match(value)) is not None:
        service = match["service"]
        if service == "ssm" and ":parameter/" in value:
            return SecretReference("ssm", value)
        if service != "secretsmanager":
            raise ValidationError("secrets", f"{value!r} is neither a Secrets Manager secret "
                                             "nor an SSM parameter")
    return SecretReference("secretsmanager", value)


def references(env: Mapping[str, str]) -> dict[str, SecretReference]:
    """The references :data:`SECRETS_VAR` holds (none when it is unset)."""
    text = env.get(SECRETS_VAR)
    if not text:
        return {}
    try:
        mapping = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(SECRETS_VAR, f"not JSON: {exc}") from None
    if not isinstance(mapping, dict):
        raise ValidationError(SECRETS_VAR, "expected an object of NAME: reference")
    out: dict[str, SecretReference] = {}
    for name, value in mapping.items():
        if not isinstance(name, str) or not ENV_NAME.match(name) or not isinstance(value, str):
            raise ValidationError(SECRETS_VAR, f"{name!r}: expected NAME: reference")
        out[name] = reference(value)
    return out


class SecretsLoader:
    """Reads a pool's secrets into an environment, through cached Powertools providers."""

    def __init__(self, clients: Clients, *, max_age: int = MAX_AGE_SECONDS) -> None:
        self._clients = clients
        self._max_age = max_age
        self._providers: dict[Store, Any] = {}
        #: The variables this loader has set: only these keep their value when a read fails.
        self._set: set[str] = set()

    def _provider(self, store: Store) -> Any:
        if store not in self._providers:
            client = self._clients.client(store)
            self._providers[store] = (SSMProvider(boto3_client=client) if store == "ssm"
                                      else SecretsProvider(boto3_client=client))
        return self._providers[store]

    def read(self, ref: SecretReference) -> str:
        provider = self._provider(ref.store)
        options: dict[str, Any] = {"decrypt": True} if ref.store == "ssm" else {}
        with _quiet():
            value = provider.get(ref.name, max_age=self._max_age, **options)
        if isinstance(value, bytes):
            # A secret stored as SecretBinary: handed over as text, as an environment holds.
            value = value.decode()
        if not isinstance(value, str):
            raise SecretUnavailable(f"{ref.store} {ref.name!r} holds no text value")
        return value

    def apply(self, environ: MutableMapping[str, str] | None = None) -> list[str]:
        """Set every referenced variable in ``environ`` (``os.environ``); the names set."""
        environ = os.environ if environ is None else environ
        applied: list[str] = []
        for name, ref in references(environ).items():
            try:
                value = self.read(ref)
            except (GetParameterError, SecretUnavailable) as exc:
                if name in self._set and name in environ:
                    # Read before: the worker keeps running with the value it has.
                    log.warning("secret %s (%s %r) could not be read again; keeping the "
                                "value read before: %s", name, ref.store, ref.name, exc)
                    continue
                raise SecretUnavailable(
                    f"secret {name} ({ref.store} {ref.name!r}) could not be read: {exc}",
                    variable=name, reference=ref.name) from None
            environ[name] = value
            self._set.add(name)
            applied.append(name)
        return applied


@cache
def _loader() -> SecretsLoader:
    return SecretsLoader(Clients(Settings.from_env()))


def apply() -> list[str]:
    """This process's pool secrets into ``os.environ`` (cached; see the module docstring)."""
    if not os.environ.get(SECRETS_VAR):
        return []
    return _loader().apply()
