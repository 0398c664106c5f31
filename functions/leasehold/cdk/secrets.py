"""A worker pool's role may read exactly its secrets, and nothing else of either store.

``secretsmanager:GetSecretValue`` on each secret (a name matches the ``-XXXXXX`` suffix
Secrets Manager appends to the ARN), ``ssm:GetParameter`` on each parameter, and
``kms:Decrypt`` on the keys named in ``secrets_keys``, only through those two services.
The values never reach the template; :mod:`leasehold.aws.secrets` reads them at start.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from leasehold.cdk.config import PoolConfig
from leasehold.cdk.environment import secret_references

#: Secrets Manager appends six random characters to a secret's name in its ARN.
SECRET_SUFFIX = "-??????"
SERVICES = {"secretsmanager": "secretsmanager:GetSecretValue", "ssm": "ssm:GetParameter"}


def _arn(scope: Construct, store: str, name: str) -> str:
    if name.startswith("arn:"):
        return name
    stack = cdk.Stack.of(scope)
    if store == "ssm":
        return stack.format_arn(service="ssm", resource="parameter",
                                resource_name=name.lstrip("/"))
    return stack.format_arn(service="secretsmanager", resource="secret",
                            resource_name=name + SECRET_SUFFIX,
                            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)


def grant_secrets(scope: Construct, pool: PoolConfig, role: iam.IRole) -> None:
    """Add the pool's read statements to ``role`` (nothing without secrets)."""
    by_store: dict[str, list[str]] = {}
    for ref in secret_references(pool.secrets).values():
        by_store.setdefault(ref.store, []).append(_arn(scope, ref.store, ref.name))
    for store, arns in sorted(by_store.items()):
        role.add_to_principal_policy(iam.PolicyStatement(
            actions=[SERVICES[store]], resources=sorted(set(arns))))
    if pool.secrets_keys:
        role.add_to_principal_policy(_decrypt(pool.secrets_keys, sorted(by_store)))


def _decrypt(keys: Sequence[str], stores: Sequence[str]) -> iam.PolicyStatement:
    return iam.PolicyStatement(
        actions=["kms:Decrypt"], resources=list(keys),
        conditions={"StringEquals": {"kms:ViaService": [
            f"{store}.{cdk.Aws.REGION}.{cdk.Aws.URL_SUFFIX}" for store in stores]}})
