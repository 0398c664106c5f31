"""What the pool that runs jobs with no code may do: exactly the AWS actions the deployment
lists, on exactly their resources, and read exactly the secrets it names (nothing else)."""

from __future__ import annotations

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

from leasehold.cdk.nag import acknowledge
from leasehold.targets.config import TargetConfig


def secret_arn(stack: Stack, where: str) -> str:
    """The ARN a ``secretsmanager:<id>`` or ``ssm:<name>`` reference reads."""
    kind, _, ident = where.partition(":")
    if ident.startswith("arn:"):
        return ident
    if kind == "secretsmanager":  # a name: its ARN ends with a random six-character suffix
        return stack.format_arn(service="secretsmanager", resource="secret",
                                resource_name=f"{ident}-??????",
                                arn_format=ArnFormat.COLON_RESOURCE_NAME)
    return stack.format_arn(service="ssm", resource="parameter",
                            resource_name=ident.lstrip("/"))


def grant_targets(principal: iam.IGrantable, config: TargetConfig) -> None:
    """Grant ``principal`` (the worker of the pool that runs targets) what ``config`` lists."""
    for grant in config.aws:
        iam.Grant.add_to_principal(grantee=principal, actions=[grant.action],
                                   resource_arns=list(grant.resources))
        if "*" in grant.resources and isinstance(principal, Construct):
            acknowledge(principal, "AwsSolutions-IAM5[Resource::*]",
                        f"{grant.action} is listed by the deployment's aws_targets with "
                        "resources ['*'] (an action that takes no resource)")
    stack = Stack.of(principal.grant_principal)  # type: ignore[arg-type]
    by_kind: dict[str, list[str]] = {}
    for where in config.secrets.values():
        by_kind.setdefault(where.partition(":")[0], []).append(secret_arn(stack, where))
    if by_kind.get("secretsmanager"):
        iam.Grant.add_to_principal(grantee=principal, actions=["secretsmanager:GetSecretValue"],
                                   resource_arns=sorted(by_kind["secretsmanager"]))
    if by_kind.get("ssm"):
        iam.Grant.add_to_principal(grantee=principal, actions=["ssm:GetParameter"],
                                   resource_arns=sorted(by_kind["ssm"]))
