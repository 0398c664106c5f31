"""What a route needs besides its arguments: the app, the API settings and the caller's tenant."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import BaseRouter

from leasehold.core.spec import check_tenant
from leasehold.errors import LeaseholdError, ValidationError
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy.admission import Backlog, Buckets, Limits

TENANT_HEADER = "x-leasehold-tenant"
DEFAULT_TENANT = "default"


class Unauthenticated(LeaseholdError):
    """The request carries no identity to take a tenant from."""

    code = "unauthenticated"


@dataclass(frozen=True, kw_only=True)
class ApiConfig:
    #: Take the tenant from the ``X-Leasehold-Tenant`` header. Only the local runtime sets
    #: this: behind API Gateway the tenant comes from the verified identity, never the client.
    trust_tenant_header: bool = False
    limits: Limits = field(default_factory=Limits)
    backlog: Backlog = field(default_factory=Backlog)
    #: This instance's last view of each tenant's token bucket (saves a read per submission).
    buckets: Buckets = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ApiConfig:
        env = os.environ if env is None else env
        trust = env.get("LEASEHOLD_TRUST_TENANT_HEADER", "").lower() in ("1", "true", "yes")
        return cls(trust_tenant_header=trust, limits=Limits.from_env(env))


def leasehold(router: BaseRouter) -> Leasehold:
    app: Leasehold = router.context["leasehold"]
    return app


def config(router: BaseRouter) -> ApiConfig:
    api_config: ApiConfig = router.context["api_config"]
    return api_config


_UNSAFE = re.compile(r"[^A-Za-z0-9_.:-]")


def _from_arn(arn: str) -> str:
    """``arn:aws:sts::123:assumed-role/Role/session`` -> ``123:Role`` (sessions share a tenant)."""
    parts = arn.split(":", 5)
    if len(parts) < 6:
        return _UNSAFE.sub("_", arn)
    account, resource = parts[4], parts[5]
    kind, _, rest = resource.partition("/")
    name = rest.split("/")[0] if kind == "assumed-role" else rest.replace("/", ":")
    return _UNSAFE.sub("_", f"{account}:{name or kind}")


def tenant_of(event: Mapping[str, Any], api_config: ApiConfig) -> str:
    """The caller's tenant, from the authorizer or the IAM principal (or, locally, a header)."""
    request = event.get("requestContext") or {}
    authorizer = request.get("authorizer") or {}
    claims = authorizer.get("claims") or {}
    for value in (authorizer.get("tenant"), claims.get("custom:tenant"), claims.get("tenant"),
                  claims.get("sub"), authorizer.get("principalId")):
        if value:
            return _checked(str(value))
    identity = request.get("identity") or {}
    if identity.get("userArn"):
        return _checked(_from_arn(str(identity["userArn"])))
    if api_config.trust_tenant_header:
        headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
        return _checked(headers.get(TENANT_HEADER) or DEFAULT_TENANT)
    raise Unauthenticated()


def _checked(tenant: str) -> str:
    try:
        return check_tenant(tenant)
    except ValidationError as exc:
        raise ValidationError("tenant", str(exc).split(": ", 1)[-1]) from None


def tenant(router: BaseRouter) -> str:
    return tenant_of(router.current_event.raw_event, config(router))
