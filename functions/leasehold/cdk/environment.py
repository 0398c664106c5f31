"""What a worker pool's task code gets in its environment: its plain settings and the
references of its secrets, checked before anything is built.

Pure (no aws_cdk import): :class:`leasehold.cdk.config.PoolConfig` checks itself with it.
The values of secrets are never here, only where they are kept (:mod:`leasehold.aws.secrets`
reads them when the worker starts).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from leasehold.aws.secrets import ENV_NAME, SECRETS_VAR, reference
from leasehold.errors import ValidationError


class PoolConfig(Protocol):
    """What is checked of a :class:`leasehold.cdk.config.PoolConfig` (which imports this)."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def environment(self) -> Mapping[str, str]: ...
    @property
    def secrets(self) -> Mapping[str, str]: ...
    @property
    def secrets_keys(self) -> Sequence[str]: ...
    @property
    def layers(self) -> Sequence[Any]: ...

#: Prefixes of names a pool's settings may not take: Leasehold's own settings, and AWS's
#: (credentials, region, endpoints: ``AWS_ENDPOINT_URL`` would send Leasehold's own calls
#: elsewhere; Lambda reserves ``AWS_LAMBDA_*``, ``AWS_EXECUTION_ENV``, ...).
RESERVED_PREFIXES = ("LEASEHOLD_", "AWS_", "_")
#: Exact names the functions set or Lambda reserves.
RESERVED_NAMES = frozenset({
    "POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE",
    "LAMBDA_TASK_ROOT", "LAMBDA_RUNTIME_DIR", "TZ",
})
#: An unresolved CDK token in a string (an ARN from another construct): checked at deploy.
_TOKEN = "${Token["


def _check_name(pool: str, kind: str, name: str) -> None:
    if not isinstance(name, str) or not ENV_NAME.match(name):
        raise ValueError(f"pool {pool!r}: {kind} {name!r} is not an environment variable name "
                         "(a letter, then letters, digits and _)")
    if name.startswith(RESERVED_PREFIXES) or name in RESERVED_NAMES:
        raise ValueError(f"pool {pool!r}: {kind} {name!r} is a name Leasehold or AWS sets "
                         f"(names starting with {', '.join(RESERVED_PREFIXES)}, or one of "
                         f"{', '.join(sorted(RESERVED_NAMES))}); choose another")


def check_pool(pool: PoolConfig) -> None:
    """Raise ValueError, naming the pool and the entry, for a setting it cannot have."""
    for name, value in pool.environment.items():
        _check_name(pool.name, "environment variable", name)
        if not isinstance(value, str):
            raise ValueError(f"pool {pool.name!r}: environment variable {name!r} must be a "
                             f"string, not {type(value).__name__}")
    for name, value in pool.secrets.items():
        _check_name(pool.name, "secret", name)
        if name in pool.environment:
            raise ValueError(f"pool {pool.name!r}: {name!r} is both a plain environment "
                             "variable and a secret; name it once")
        if not isinstance(value, str):
            raise ValueError(f"pool {pool.name!r}: secret {name!r} must name a secret")
        if _TOKEN not in value:
            try:
                reference(value)
            except ValidationError as exc:
                raise ValueError(f"pool {pool.name!r}: secret {name!r}: {exc}") from None
    for key in pool.secrets_keys:
        if _TOKEN not in key and not (key.startswith("arn:") and ":kms:" in key):
            raise ValueError(f"pool {pool.name!r}: secrets_keys takes KMS key ARNs, not "
                             f"{key!r}")
    if pool.secrets_keys and not pool.secrets:
        raise ValueError(f"pool {pool.name!r}: secrets_keys without secrets")
    if pool.layers and pool.kind != "lambda":
        raise ValueError(f"pool {pool.name!r}: layers are for Lambda pools; an ECS pool's "
                         "image holds what its tasks need")


def check_network(owner: str, vpc: Any, subnets: Any,
                  security_groups: Sequence[Any] | None) -> None:
    """Subnets and security groups are chosen in a VPC: without one they mean nothing."""
    if vpc is None and (subnets is not None or security_groups):
        raise ValueError(f"{owner}: subnets and security_groups need a vpc (the "
                         "deployment's LeaseholdConfig.vpc, or the pool's own)")


def pool_environment(pool: PoolConfig) -> dict[str, str]:
    """The variables a pool's workers get beyond the deployment's: its settings, and its
    secrets' references as :data:`~leasehold.aws.secrets.SECRETS_VAR`."""
    env = dict(pool.environment)
    if pool.secrets:
        env[SECRETS_VAR] = json.dumps(dict(pool.secrets), separators=(",", ":"),
                                      sort_keys=True)
    return env


def secret_references(secrets: Mapping[str, str]) -> dict[str, Any]:
    """Each secret's parsed reference (store and name), for the grants."""
    return {name: reference(value) for name, value in secrets.items()}
