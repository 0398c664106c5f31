"""The targets role: what jobs with no code may do, and nothing of Leasehold's.

Outbound calls never carry the worker's own role, which reads and writes Leasehold's tables
and queues. They run under a role of their own, which holds exactly the AWS actions the
deployment lists (``aws_targets``) on exactly their resources and the reads of exactly the
secrets it names (``http_secrets``): no statement on Leasehold's tables, queues or bus. Its
trust policy admits only the role of the worker that runs targets, which may assume it and
nothing else new (``sts:AssumeRole`` on this role). The worker assumes it per job with a
session policy narrowing it further (``leasehold.targets.credentials``).
"""

from __future__ import annotations

import aws_cdk as cdk
import jsii
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


def needs_role(config: TargetConfig) -> bool:
    """Whether outbound calls need AWS credentials: an AWS target, a signed URL or a secret."""
    return bool(config.aws or config.sigv4 or config.secrets)


@jsii.implements(cdk.IStableStringProducer)
class _Trusted:
    """The worker role's ARN, known once the workers are built (after the role, whose ARN
    every function's environment carries)."""

    def __init__(self) -> None:
        self.arn: str | None = None

    def produce(self) -> str | None:
        return self.arn


class TargetsRole(Construct):
    """The role outbound calls run under; :meth:`trust` names the worker that assumes it."""

    def __init__(self, scope: Construct, construct_id: str, *, config: TargetConfig) -> None:
        super().__init__(scope, construct_id)
        self._trusted = _Trusted()
        self.role = iam.Role(
            self, "Role", assumed_by=iam.ArnPrincipal(cdk.Lazy.string(self._trusted)),
            description="Leasehold targets: the AWS actions and secrets jobs with no code may "
                        "use, assumed per job by the worker that runs them",
            # A session is a job's: STS's shortest (15 min) is asked for.
            max_session_duration=cdk.Duration.hours(1))
        grant_targets(self.role, config)

    def trust(self, worker: iam.IRole) -> None:
        """Let ``worker`` (the role of the pool that runs targets), and it alone, assume it."""
        if self._trusted.arn is not None:
            raise ValueError("the targets role trusts one worker role")
        self._trusted.arn = worker.role_arn
        self.role.grant_assume_role(worker)


def grant_targets(principal: iam.IGrantable, config: TargetConfig) -> None:
    """Grant ``principal`` (the targets role) what ``config`` lists."""
    for grant in config.aws:
        iam.Grant.add_to_principal(grantee=principal, actions=[grant.action],
                                   resource_arns=list(grant.resources))
        for resource in grant.resources:
            if "*" in resource and isinstance(principal, Construct):
                # The deployment's own choice; each call is narrowed further by its session
                # policy, which denies Leasehold's own resources (leasehold.targets.aws).
                acknowledge(principal, f"AwsSolutions-IAM5[Resource::{resource}]",
                            f"{grant.action} on {resource} is listed by the deployment's "
                            "aws_targets ('*' alone: an action that takes no resource); each "
                            "job's session allows only the resource its call names")
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
