"""What a route needs besides its arguments: the app, the API settings and the caller's tenant."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.event_handler.api_gateway import BaseRouter

from leasehold.api.principals import parse_mapping, parse_workers, principal_of
from leasehold.core.spec import check_tenant
from leasehold.errors import LeaseholdError, ValidationError
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy.admission import Backlog, Buckets, Limits
from leasehold.tenancy.plans import limits_for

TENANT_HEADER = "x-leasehold-tenant"
DEFAULT_TENANT = "default"


class Unauthenticated(LeaseholdError):
    """The request carries no identity to take a tenant from."""

    code = "unauthenticated"


class Forbidden(LeaseholdError):
    """The caller may not do that (a shared pool is paused or resumed by operators only)."""

    code = "forbidden"


class UnknownPrincipal(Unauthenticated):
    """The caller's IAM identity is not a user, role session, federated user or root."""


@dataclass(frozen=True, kw_only=True)
class ApiConfig:
    #: Take the tenant from the ``X-Leasehold-Tenant`` header. Only the local runtime sets
    #: this: behind API Gateway the tenant comes from the verified identity, never the client.
    trust_tenant_header: bool = False
    #: Admission limits for every tenant; None (as deployed): the app's settings, the same
    #: on every function (``LeaseholdConfig``'s ``tenant_*``). A tenant's plan overrides
    #: either (:meth:`limits_for`).
    limits: Limits | None = None
    backlog: Backlog = field(default_factory=Backlog)
    #: This instance's last view of each tenant's token bucket (saves a read per submission).
    buckets: Buckets = field(default_factory=dict)
    #: The operator's mapping, principal (``ACCOUNT:KIND/NAME``) -> tenant; a principal not in
    #: it is its own tenant (see :mod:`leasehold.api.principals`).
    tenants: Mapping[str, str] = field(default_factory=dict)
    #: Tenants that may pause and resume pools, which every tenant shares
    #: (``LEASEHOLD_OPERATORS``, comma separated; none by default).
    operators: frozenset[str] = frozenset()
    #: Workers in any language (``leasehold.api.workers``): principal -> the pools it may
    #: lease from (``LEASEHOLD_WORKER_MAP``, JSON ``{"ARN or ACCOUNT:role/NAME": ["pool"]}``,
    #: written by ``grant_lease``). A tenant's caller is in no entry: it may not lease.
    workers: Mapping[str, frozenset[str]] = field(default_factory=dict)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ApiConfig:
        env = os.environ if env is None else env
        trust = env.get("LEASEHOLD_TRUST_TENANT_HEADER", "").lower() in ("1", "true", "yes")
        # A bad mapping fails the API's start: better no answer than the wrong tenant's.
        tenants = parse_mapping(env.get("LEASEHOLD_TENANT_MAP", ""))
        operators = frozenset(t.strip() for t in env.get("LEASEHOLD_OPERATORS", "").split(",")
                              if t.strip())
        return cls(trust_tenant_header=trust, tenants=tenants,
                   operators=operators,
                   workers=parse_workers(env.get("LEASEHOLD_WORKER_MAP", "")))


    def limits_for(self, app: Leasehold, tenant: str) -> Limits:
        """The limits in force for ``tenant``'s admission (see :mod:`leasehold.tenancy.plans`):
        the ones a worker's ``ctx.spawn`` applies too."""
        return limits_for(app, tenant, self.limits)


def leasehold(router: BaseRouter) -> Leasehold:
    app: Leasehold = router.context["leasehold"]
    return app


def config(router: BaseRouter) -> ApiConfig:
    api_config: ApiConfig = router.context["api_config"]
    return api_config


def tenant_of(event: Mapping[str, Any], api_config: ApiConfig) -> str:
    """The caller's tenant, from the authorizer or the IAM principal (or, locally, a header)."""
    request = event.get("requestContext") or {}
    authorizer = request.get("authorizer") or {}
    # An HTTP API's JWT authorizer puts the claims under "jwt" (REST's Cognito: "claims").
    claims = authorizer.get("claims") or (authorizer.get("jwt") or {}).get("claims") or {}
    for value in (authorizer.get("tenant"), claims.get("custom:tenant"), claims.get("tenant"),
                  claims.get("sub"), authorizer.get("principalId")):
        if value:
            return _checked(str(value))
    identity = request.get("identity") or {}
    # An HTTP API's IAM authorizer: the verified caller under "iam" (payload format 2.0).
    user_arn = identity.get("userArn") or (authorizer.get("iam") or {}).get("userArn")
    if user_arn:
        principal = principal_of(str(user_arn))
        if principal is None:
            raise UnknownPrincipal()
        return _checked(api_config.tenants.get(principal, principal))
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
