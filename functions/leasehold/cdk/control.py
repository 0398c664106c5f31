"""The control table of cells with a home Region (issue 48, docs/regions.md).

An MRSC global table (``MultiRegionConsistency: STRONG``): three replicas, or two and a
witness, all in one Region set (US, EU or AP). A conditional write is checked in every
Region, so two cells cannot both win a tenant's home or a Region's lease, and a Region cut
off from the other two can write nothing. The stack of the first of ``control_regions``
creates it (``AWS::DynamoDB::GlobalTable`` with its replicas); every cell's stack reads and
writes it in the nearest replica (``LEASEHOLD_CONTROL_REGION``). MRSC allows no TTL, LSI or
transaction, and the table has none; it must be empty at creation, which a new one is.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

#: The Region sets MRSC spans (AWS: "Multi-Region strong consistency" availability).
REGION_SETS = (
    frozenset({"us-east-1", "us-east-2", "us-west-2"}),
    frozenset({"eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1"}),
    frozenset({"ap-northeast-1", "ap-northeast-2", "ap-northeast-3"}),
)


def check_control_regions(regions: Sequence[str], witness: str | None) -> None:
    """Refuse what MRSC refuses: three Regions, or two and a witness, in one Region set."""
    everyone = [*regions, *([witness] if witness else [])]
    if len(set(everyone)) != len(everyone):
        raise ValueError(f"controlRegions and controlWitness must all differ: {everyone}")
    if len(everyone) != 3 or (witness is None and len(regions) != 3) or \
            (witness is not None and len(regions) != 2):
        raise ValueError("an MRSC control table has exactly three Regions, or two and a "
                         f"witness; got {list(regions)} and witness {witness}")
    if not any(set(everyone) <= region_set for region_set in REGION_SETS):
        raise ValueError(f"the control table's Regions {everyone} must lie in one Region "
                         "set: US (us-east-1, us-east-2, us-west-2), EU or AP")


class ControlTable(Construct):
    """The control table: created by the primary Region's stack, imported by the others."""

    def __init__(self, scope: Construct, construct_id: str, *, table_name: str,
                 regions: Sequence[str], witness: str | None, cell_region: str,
                 retain_data: bool) -> None:
        super().__init__(scope, construct_id)
        check_control_regions(regions, witness)
        self.table_name = table_name
        #: The replica this cell calls: its own Region's, else the primary's.
        self.region = cell_region if cell_region in regions else regions[0]
        self.created: dynamodb.TableV2 | None = None
        if cell_region == regions[0]:
            self.created = dynamodb.TableV2(
                self, "Table", table_name=table_name,
                partition_key=dynamodb.Attribute(name="pk",
                                                 type=dynamodb.AttributeType.STRING),
                billing=dynamodb.Billing.on_demand(),
                multi_region_consistency=dynamodb.MultiRegionConsistency.STRONG,
                replicas=[dynamodb.ReplicaTableProps(region=region) for region in regions[1:]],
                witness_region=witness,
                point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                    point_in_time_recovery_enabled=True),
                deletion_protection=retain_data,
                removal_policy=cdk.RemovalPolicy.RETAIN if retain_data
                else cdk.RemovalPolicy.DESTROY)
            self.table: dynamodb.ITableV2 = self.created
        else:
            stack = cdk.Stack.of(self)
            self.table = dynamodb.TableV2.from_table_arn(
                self, "Imported", stack.format_arn(
                    service="dynamodb", region=self.region, resource="table",
                    resource_name=table_name))

    def grant(self, grantee: iam.IGrantable) -> iam.Grant:
        """Read and write the control table (a cell's guard and front door, the operator)."""
        return self.table.grant_read_write_data(grantee)
