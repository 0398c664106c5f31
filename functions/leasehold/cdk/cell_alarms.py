"""The alarms a failover needs (issue 48): a cell whose Region lease is ageing, clients
that keep submitting to a cell that is not their tenant's home, and, where the cell's jobs
table has replicas for a take-over, their replication lag.

Both watch EMF metrics the cell's functions publish (``leasehold.cells.cell``):
``RegionLeaseAgeMs`` at each try to renew the lease (a working cell tries every third of
the lease, so a renewal that keeps failing shows as an age past two thirds of it, before
the cell fences itself at the lease's end), and ``MisdirectedSubmissions`` at each 421. A
cell that does no work reports no age, and is not alarmed for it (missing data is not
breaching); its ticker's and sweeper's own alarms watch that it runs.

The replication lag is DynamoDB's own ``ReplicationLatency`` (``AWS/DynamoDB``, by
``TableName`` and ``ReceivingRegion``, published in the Region that sends), one alarm per
replica Region (``LeaseholdConfig.jobs_replica_regions``). A take-over's duplicates are the
jobs the lost Region ran inside that lag (docs/regions.md): past the threshold the bound a
take-over would report is that large, so the operator knows before declaring one. A table
without writes publishes nothing, and is not alarmed for it.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns as sns
from constructs import Construct

from leasehold.cdk.monitoring import leasehold_metric
from leasehold.cells.cell import LEASE_AGE_METRIC, MISDIRECTED_METRIC

#: Misdirected submissions in 5 minutes that mean clients did not follow a failover.
MISDIRECTED_ALARM_COUNT = 50
#: Minutes in a row the replication lag must stay past its threshold (a spike is not one).
REPLICATION_LAG_MINUTES = 3


class CellAlarms(Construct):
    """The Region lease's age and misdirected submissions, to the stack's alarm topic."""

    def __init__(self, scope: Construct, construct_id: str, *, topic: sns.ITopic,
                 region: str, lease_seconds: float, jobs_table: str = "",
                 replica_regions: Sequence[str] = (),
                 replication_lag_seconds: float = 60) -> None:
        super().__init__(scope, construct_id)
        action = actions.SnsAction(topic)
        self.alarms: list[cloudwatch.Alarm] = []

        def alarm(name: str, metric: cloudwatch.IMetric, threshold: float,
                  description: str, *, periods: int) -> None:
            created = cloudwatch.Alarm(
                self, name, metric=metric, threshold=threshold, alarm_description=description,
                evaluation_periods=periods, datapoints_to_alarm=periods,
                comparison_operator=cloudwatch.ComparisonOperator
                .GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)
            created.add_alarm_action(action)
            created.add_ok_action(action)
            self.alarms.append(created)

        alarm("RegionLeaseAge", leasehold_metric(LEASE_AGE_METRIC, "Maximum"),
              int(lease_seconds * 1000 * 2 / 3),
              f"Cell {region} has not renewed its Region lease for two thirds of it: the "
              "control table is out of reach, or the Region was failed over. It stops "
              "leasing, finishing and accepting work at the lease's end. "
              "See docs/regions.md#failover-and-failback.", periods=1)
        alarm("MisdirectedSubmissions",
              leasehold_metric(MISDIRECTED_METRIC).with_(period=cdk.Duration.minutes(5)),
              MISDIRECTED_ALARM_COUNT,
              f"Clients keep submitting to cell {region} for tenants homed elsewhere (421): "
              "they do not follow Leasehold-Home-Url, or point at the old home after a "
              "failover. See docs/regions.md#submitting.", periods=1)
        for replica in replica_regions:
            alarm("ReplicationLag" + "".join(part.title() for part in replica.split("-")),
                  cloudwatch.Metric(namespace="AWS/DynamoDB", metric_name="ReplicationLatency",
                                    statistic="Maximum", period=cdk.Duration.minutes(1),
                                    dimensions_map={"TableName": jobs_table,
                                                    "ReceivingRegion": replica}),
                  int(replication_lag_seconds * 1000),
                  f"Cell {region}'s jobs table replicates to {replica} more than "
                  f"{replication_lag_seconds:g} s late: a take-over from that replica "
                  "(leasehold regions failover --take-over) would re-run every job the cell "
                  "ran inside the lag. See docs/regions.md#taking-over-a-lost-regions-jobs-"
                  "opt-in-at-least-once.", periods=REPLICATION_LAG_MINUTES)
