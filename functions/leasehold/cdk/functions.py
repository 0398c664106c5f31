"""One Lambda function with its own role and log group: the shape every Leasehold function has.

Each function gets its own role (grants differ per function) and its own log group with a
retention, instead of the account-wide default role with the AWS managed
``AWSLambdaBasicExecutionRole`` policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from leasehold.cdk.code import ARCHITECTURE, RUNTIME
from leasehold.cdk.nag import acknowledge

XRAY_REASON = ("X-Ray's PutTraceSegments and PutTelemetryRecords do not support resource-level "
               "permissions; CDK adds exactly these two actions for active tracing.")
VPC_REASON = ("Lambda adds AWSLambdaVPCAccessExecutionRole to a function in a VPC: the "
              "network interface actions it needs, which support no resource-level "
              "permissions; AWS maintains the policy for exactly that.")
RUNTIME_REASON = ("Pinned to Python 3.12, the version the project is tested and bundled for "
                  "(pip installs cp312 arm64 wheels); upgrade together with CI.")


class LeaseholdFunction(Construct):
    """A Python 3.12 arm64 function with JSON logs, X-Ray tracing and a least-privilege role."""

    def __init__(self, scope: Construct, construct_id: str, *, handler: str,
                 code: lambda_.Code, environment: Mapping[str, str], memory_mb: int,
                 timeout_seconds: int, log_retention: logs.RetentionDays,
                 description: str, vpc: ec2.IVpc | None = None,
                 subnets: ec2.SubnetSelection | None = None,
                 security_groups: Sequence[ec2.ISecurityGroup] | None = None,
                 layers: Sequence[lambda_.ILayerVersion] = ()) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self, "Logs", retention=log_retention, removal_policy=cdk.RemovalPolicy.DESTROY)
        self.role = iam.Role(
            self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Runs {handler}")
        self.log_group.grant_write(self.role)
        self.function = lambda_.Function(
            self, "Function",
            runtime=RUNTIME, architecture=ARCHITECTURE, handler=handler, code=code,
            role=self.role, environment=dict(environment), memory_size=memory_mb,
            timeout=cdk.Duration.seconds(timeout_seconds), description=description,
            tracing=lambda_.Tracing.ACTIVE, log_group=self.log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            vpc=vpc, vpc_subnets=subnets if vpc is not None else None,
            security_groups=list(security_groups) if security_groups is not None else None,
            layers=list(layers) or None,
        )
        if vpc is not None:
            acknowledge(self.role, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:"
                        "policy/service-role/AWSLambdaVPCAccessExecutionRole]", VPC_REASON)
        acknowledge(self.role, "AwsSolutions-IAM5[Resource::*]", XRAY_REASON)
        acknowledge(self.function, "AwsSolutions-L1", RUNTIME_REASON)
        acknowledge(self.function, "Serverless-LambdaLatestVersion", RUNTIME_REASON)
