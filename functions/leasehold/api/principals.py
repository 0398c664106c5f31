"""Tenants of IAM principals: one per principal, unless the operator's mapping says otherwise.

Behind API Gateway's IAM auth the caller is ``requestContext.identity.userArn``. Its tenant is
``ACCOUNT:KIND/NAME`` (``ACCOUNT:root`` for the account's root user), where KIND is ``user``,
``role`` (every session of the role) or ``federated-user``, and NAME is the exact IAM name:
IAM names use only ``A-Za-z0-9_+=,.@-``, all of which a tenant may hold, so nothing is folded
and two principals never share a tenant by accident. The path of a user is left out: IAM
user names are unique within an account whatever their path (and a role session's ARN
carries no path at all), so a user moved to another path keeps its tenant.

The operator's mapping (stack context ``tenants``, env ``LEASEHOLD_TENANT_MAP``) sends a
principal to a named tenant, which also lets several principals share one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from leasehold.core.spec import check_tenant
from leasehold.errors import ValidationError

#: What IAM allows in user, role and federated user names.
_IAM_NAME = re.compile(r"^[A-Za-z0-9_+=,.@-]{1,64}$")
_ACCOUNT = re.compile(r"^[0-9]{12}$")
#: The canonical form, accepted as a mapping key beside ARNs.
_PRINCIPAL = re.compile(r"^(?P<account>[0-9]{12}):(?:root|(?P<kind>user|role|federated-user)"
                        r"/(?P<name>[^/]+))$")


def principal_of(arn: str) -> str | None:
    """``arn:aws:sts::123456789012:assumed-role/Deploy/s1`` -> ``123456789012:role/Deploy``.

    Also takes the ARN of a role (``arn:aws:iam::…:role/path/Deploy``: what an operator
    copies into the mapping) and the canonical form itself. None: not a principal Leasehold
    can name without ambiguity (refused, never guessed)."""
    if (found := _PRINCIPAL.fullmatch(arn)) is not None:
        name = found["name"]
        return arn if name is None or _IAM_NAME.fullmatch(name) else None
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn" or not _ACCOUNT.fullmatch(parts[4]):
        return None
    service, account, resource = parts[2], parts[4], parts[5]
    if resource == "root" and service == "iam":
        return f"{account}:root"
    kind, _, rest = resource.partition("/")
    segments = rest.split("/")
    if service == "sts" and kind == "assumed-role" and len(segments) == 2:
        kind, name = "role", segments[0]
    elif service == "sts" and kind == "federated-user" and len(segments) == 1:
        name = segments[0]
    elif service == "iam" and kind in ("user", "role"):
        name = segments[-1]  # the path (every segment before the name) is not identity
    else:
        return None
    return f"{account}:{kind}/{name}" if _IAM_NAME.fullmatch(name) else None


def parse_mapping(value: object) -> dict[str, str]:
    """The operator's mapping (a JSON object, or its text): principal -> tenant.

    Keys are principal ARNs or canonical ids; values any valid tenant. Raises
    :class:`ValueError` naming the entry at fault, so a bad mapping stops the synth (and,
    if it got past that, the API's start) rather than sending someone to the wrong tenant."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError as exc:
            raise ValueError(f"the tenant mapping is not JSON: {exc}") from None
    if not isinstance(value, Mapping):
        raise ValueError("the tenant mapping must be a JSON object: principal ARN -> tenant")
    mapping: dict[str, str] = {}
    for key, target in value.items():
        principal = principal_of(str(key))
        if principal is None:
            raise ValueError(
                f"tenant mapping: {key!r} is not an IAM user, role, federated user or root "
                "ARN (or ACCOUNT:user/NAME, ACCOUNT:role/NAME, ACCOUNT:federated-user/NAME, "
                "ACCOUNT:root)")
        try:
            tenant = check_tenant(target)
        except ValidationError as exc:
            raise ValueError(f"tenant mapping: {key!r} maps to {target!r}, not a valid "
                             f"tenant ({exc})") from None
        if mapping.get(principal, tenant) != tenant:
            raise ValueError(f"tenant mapping: {principal} is given twice, to "
                             f"{mapping[principal]!r} and {tenant!r}")
        mapping[principal] = tenant
    return mapping


def parse_workers(value: str) -> dict[str, frozenset[str]]:
    """The worker mapping (JSON text): principal ARN or canonical id -> the pools it may
    lease from. Raises :class:`ValueError` naming the entry at fault."""
    try:
        data = json.loads(value) if value.strip() else {}
    except ValueError as exc:
        raise ValueError(f"the worker mapping is not JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise ValueError("the worker mapping must be a JSON object: principal ARN -> [pool]")
    mapping: dict[str, frozenset[str]] = {}
    for key, pools in data.items():
        principal = principal_of(str(key))
        if principal is None or not isinstance(pools, list) or \
                not all(isinstance(p, str) for p in pools):
            raise ValueError(f"worker mapping: {key!r} -> {pools!r} is not a principal "
                             "ARN mapped to a list of pools")
        mapping[principal] = mapping.get(principal, frozenset()) | frozenset(pools)
    return mapping
