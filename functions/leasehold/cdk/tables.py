"""DynamoDB tables, built by looping over :data:`leasehold.aws.definitions.TABLES`.

The local runtime creates its tables from the same definitions, so the keys, indexes and
projections deployed here are the ones the code was tested against.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct, IConstruct

from leasehold.aws.definitions import TABLES, Key, TableDefinition
from leasehold.cdk.nag import acknowledge
from leasehold.settings import Settings

_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER}
_PROJECTIONS = {
    "KEYS_ONLY": dynamodb.ProjectionType.KEYS_ONLY,
    "INCLUDE": dynamodb.ProjectionType.INCLUDE,
    "ALL": dynamodb.ProjectionType.ALL,
}


def _attribute(key: Key) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=key.name, type=_TYPES[key.type])


class Tables(Construct):
    """Every table of the definitions: on-demand, with point-in-time recovery; encrypted
    with DynamoDB's AWS owned key, or with ``key`` (the stack's, which the queues use).

    Under ``key``, CDK's table grants also grant the key (``kms:Decrypt``, ``Encrypt``,
    ``DescribeKey``, ``ReEncrypt*``, ``GenerateDataKey*``) to each grantee: DynamoDB uses
    the key on the caller's behalf, so every function that reads or writes needs it.
    """

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings,
                 retain_data: bool, key: kms.IKey | None = None) -> None:
        super().__init__(scope, construct_id)
        #: The customer-managed key of every table, or None (AWS owned).
        self.key = key
        self.by_role: dict[str, dynamodb.Table] = {}
        for definition in TABLES:
            self.by_role[definition.role] = self._table(definition, settings, retain_data)

    def _table(self, definition: TableDefinition, settings: Settings,
               retain_data: bool) -> dynamodb.Table:
        # dynamodb.Table, not TableV2: AWS::DynamoDB::GlobalTable buys nothing in one region
        # and moto's CloudFormation (our deploy test) only knows AWS::DynamoDB::Table.
        table = dynamodb.Table(
            self, definition.role.title(),
            table_name=definition.table_name(settings),
            partition_key=_attribute(definition.partition),
            sort_key=_attribute(definition.sort) if definition.sort else None,
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            deletion_protection=retain_data,
            removal_policy=cdk.RemovalPolicy.RETAIN if retain_data else cdk.RemovalPolicy.DESTROY,
            time_to_live_attribute=definition.ttl_attribute,
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES if definition.stream else None,
            encryption=(dynamodb.TableEncryption.CUSTOMER_MANAGED if self.key is not None
                        else None),
            encryption_key=self.key,
        )
        for index in definition.indexes:
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_attribute(index.partition),
                sort_key=_attribute(index.sort) if index.sort else None,
                projection_type=_PROJECTIONS[index.projection],
                non_key_attributes=list(index.include) or None,
            )
        return table

    @property
    def jobs(self) -> dynamodb.Table:
        return self.by_role["jobs"]

    def grant_data(self, grantee: iam.IGrantable) -> None:
        """Read and write every Leasehold table.

        Every function runs the same core, whose store observers touch the tenant counters,
        workflows and coordination rows on any job transition, so the grant is per table set,
        never beyond it.
        """
        for table in self.by_role.values():
            table.grant_read_write_data(grantee)

    def acknowledge_index_grants(self, scope: IConstruct) -> None:
        """Accept the ``<table>/index/*`` resource that ``grant_read_write_data`` adds, and
        under a customer-managed key the key actions' wildcards it adds."""
        stack = cdk.Stack.of(self)
        if self.key is not None:
            for action in ("kms:ReEncrypt*", "kms:GenerateDataKey*"):
                acknowledge(scope, f"AwsSolutions-IAM5[Action::{action}]",
                            "What CDK's DynamoDB table grant adds for a table under a "
                            "customer-managed key (ReEncryptFrom/To, GenerateDataKey and "
                            "WithoutPlaintext), on the one key of the stack's tables.")
        for definition in TABLES:
            if not definition.indexes:
                continue
            table = self.by_role[definition.role]
            logical_id = stack.resolve(stack.get_logical_id(
                table.node.default_child))  # type: ignore[arg-type]
            acknowledge(scope, f"AwsSolutions-IAM5[Resource::<{logical_id}.Arn>/index/*]",
                        "Queries on this table's own GSIs (due, leases, by_tenant, ...); the "
                        "wildcard covers the indexes of one table and nothing else.")
