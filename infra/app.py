"""The CDK app: ``cdk synth`` / ``cdk deploy`` run ``python -m infra.app`` (see cdk.json).

Configuration comes from CDK context (``cdk.json`` or ``-c key=value``); see
:meth:`infra.config.LeaseholdConfig.from_context`. cdk-nag's AwsSolutions and Serverless packs
run on every synth and fail it on any unacknowledged finding.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

from infra.stack import LeaseholdStack
from leasehold.cdk import LeaseholdConfig

STACK_NAME = "Leasehold"
#: CDK's recommended feature flags are all on in cdk.json except these, each with its reason.
FLAGS_LEFT_OFF = {
    "@aws-cdk/aws-ec2:restrictDefaultSecurityGroup": (
        "Strips the rules of the ECS pools' VPC default security group through a custom "
        "resource: a Node.js Lambda that moto's CloudFormation cannot run without Docker "
        "(the stack stays CREATE_IN_PROGRESS), whose role carries the AWS managed basic "
        "execution policy the stack otherwise avoids. Nothing uses the default group: the "
        "Fargate workers get their own security group with no inbound rules."),
}


def build(app: cdk.App, *, config: LeaseholdConfig | None = None, nag: bool = True,
          **stack_kwargs: Any) -> LeaseholdStack:
    """Add the Leasehold stack (and the cdk-nag checks) to ``app``."""
    config = config or LeaseholdConfig.from_context(app.node.try_get_context)
    stack = LeaseholdStack(
        app, app.node.try_get_context("stackName") or STACK_NAME, config=config,
        description="Leasehold: a distributed job scheduler on AWS managed services",
        **stack_kwargs)
    if nag:
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    return stack


def main() -> None:
    app = cdk.App()
    build(app)
    app.synth()


if __name__ == "__main__":
    main()
