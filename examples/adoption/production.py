"""The greeter application in production: its tasks use its own table, bucket, API key and
database (in its VPC), and its own function submits jobs and enqueues them in its own
transactions. Only the documented API of ``leasehold.cdk`` (README, "Permissions, settings,
secrets and VPC"); tests/infra/test_production.py synthesizes it.

``python production.py`` (or ``cdk synth`` with ``"app": "python production.py"``).
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks, ServerlessChecks

from leasehold.cdk import Leasehold, LeaseholdConfig, PoolConfig

HERE = Path(__file__).resolve().parent
#: A layer of the application's (a shared client library, a monitoring extension).
LAYER_ARN = "arn:aws:lambda:eu-west-1:111122223333:layer:greeter-shared:3"
#: The customer-managed key the database password's SSM parameter is encrypted with.
PARAMETER_KEY_ARN = ("arn:aws:kms:eu-west-1:111122223333:key/"
                     "1234abcd-12ab-34cd-56ef-1234567890ab")


_RUNTIME = "Python 3.12, the version Leasehold's bundle is built for."
_CHECKOUT_REASONS = {
    "AwsSolutions-L1": _RUNTIME, "Serverless-LambdaLatestVersion": _RUNTIME,
    "Serverless-LambdaDLQ": "Invoked synchronously by the web tier, which sees its errors.",
}


def production(stack: cdk.Stack, *, config: LeaseholdConfig | None = None) -> Leasehold:
    """The application's resources and its Leasehold, in ``stack``."""
    vpc = ec2.Vpc(stack, "Vpc", max_azs=2, nat_gateways=0,
                  subnet_configuration=[ec2.SubnetConfiguration(
                      name="private", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)],
                  flow_logs={"rejected": ec2.FlowLogOptions(
                      traffic_type=ec2.FlowLogTrafficType.REJECT)})
    # The workers reach DynamoDB through a free gateway endpoint; SQS, EventBridge, SSM,
    # Secrets Manager and CloudWatch through interface endpoints (docs/operations.md).
    vpc.add_gateway_endpoint("DynamoDb", service=ec2.GatewayVpcEndpointAwsService.DYNAMODB)
    database_clients = ec2.SecurityGroup(stack, "DatabaseClients", vpc=vpc,
                                         description="May connect to the greeter database")
    orders = dynamodb.Table(
        stack, "Orders", partition_key=dynamodb.Attribute(
            name="id", type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
            point_in_time_recovery_enabled=True),
        removal_policy=cdk.RemovalPolicy.DESTROY)
    reports = s3.Bucket.from_bucket_name(stack, "Reports", "greeter-reports")

    jobs = Leasehold(
        stack, "Jobs",
        code=[HERE / "greeter"], tasks=["greeter.tasks"],
        requirements=HERE / "requirements.txt",
        required_tasks=["greeter.greet"],
        # Every worker pool in the application's VPC, with a group the database admits.
        vpc=vpc, subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED),
        security_groups=[database_clients],
        pools=[
            PoolConfig(
                name="default",
                environment={"GREETING_STYLE": "formal"},
                secrets={"API_KEY": "greeter/api-key",                  # Secrets Manager
                         "DB_PASSWORD": "ssm:/greeter/db-password"},    # SSM SecureString
                secrets_keys=[PARAMETER_KEY_ARN],
                layers=[lambda_.LayerVersion.from_layer_version_arn(
                    stack, "SharedLayer", LAYER_ARN)]),
            PoolConfig(name="batch", kind="ecs",
                       environment={"REPORTS_BUCKET": reports.bucket_name},
                       secrets={"API_KEY": "greeter/api-key"}),
        ],
        config=config or LeaseholdConfig(prefix="greeter", table_encryption="customer-managed"),
    )
    # The tasks use the application's own table and bucket: grants, as with any construct.
    orders.grant_read_write_data(jobs.pool("default"))
    reports.grant_read(jobs.pool("batch"))
    jobs.pool("default").add_to_role_policy(iam.PolicyStatement(
        actions=["ses:SendEmail"], resources=[stack.format_arn(
            service="ses", resource="identity", resource_name="greeter.example.com")]))

    # The application's own role (its web backend) submits jobs through the API, and
    # enqueues them in its own DynamoDB transactions with leasehold.enqueue_item.
    backend = iam.Role(stack, "Backend",
                       assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    jobs.grant_submit(backend)
    jobs.grant_enqueue(backend)
    orders.grant_read_write_data(backend)
    # Its function gets the environment compose() reads (table names, task modules, ...);
    # its bundle holds the greeter package, as the workers' does.
    checkout = lambda_.Function(
        stack, "Checkout", runtime=lambda_.Runtime.PYTHON_3_12,
        architecture=lambda_.Architecture.ARM_64, handler="greeter.checkout.handler",
        code=lambda_.Code.from_asset(str(HERE)), role=backend,
        tracing=lambda_.Tracing.ACTIVE, timeout=cdk.Duration.seconds(10), memory_size=256,
        description="The greeter's checkout: an order and its job in one transaction")
    jobs.environment_for(checkout)
    cdk.Validations.of(checkout).acknowledge(*(cdk.Acknowledgment(id=rule, reason=reason) for
                                               rule, reason in _CHECKOUT_REASONS.items()))
    cdk.Validations.of(backend).acknowledge(cdk.Acknowledgment(
        id="AwsSolutions-IAM5[Resource::*]", reason="X-Ray's PutTraceSegments and "
        "PutTelemetryRecords (active tracing), which support no resource-level permissions."))
    # grant_read's actions and objects are the bucket's by design.
    cdk.Validations.of(jobs.pool("batch").role).acknowledge(*(cdk.Acknowledgment(
        id=f"AwsSolutions-IAM5[{finding}]", reason="The batch tasks read every report of "
        "the greeter-reports bucket: Bucket.grant_read's actions on its objects.")
        for finding in ("Action::s3:GetBucket*", "Action::s3:GetObject*", "Action::s3:List*",
                        "Resource::arn:<AWS::Partition>:s3:::greeter-reports/*")))
    cdk.CfnOutput(stack, "ApiUrl", value=jobs.api.url)
    return jobs


def main() -> None:
    app = cdk.App()
    stack = cdk.Stack(app, "GreeterProduction",
                      description="The greeter application and its job scheduler")
    production(stack)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), ServerlessChecks(app))
    app.synth()


if __name__ == "__main__":
    main()
