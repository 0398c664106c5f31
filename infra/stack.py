"""The Leasehold stack of this repository: one user of the :class:`leasehold.cdk.Leasehold`
construct, deploying the example tasks (or the ones named in context), plus the outputs the
CLI and the console read."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from leasehold.cdk import Leasehold, LeaseholdConfig
from leasehold.cdk.construct import API_HANDLER

__all__ = ["API_HANDLER", "LeaseholdStack"]


class LeaseholdStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: LeaseholdConfig,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.leasehold = jobs = Leasehold(self, "Leasehold", config=config)
        cdk.CfnOutput(self, "ApiUrl", value=jobs.api.url, description="The REST API's base URL")
        cdk.CfnOutput(self, "AlarmTopicArn", value=jobs.monitoring.topic.topic_arn)
        cdk.CfnOutput(self, "DashboardName", value=jobs.monitoring.dashboard.dashboard_name)
        cdk.CfnOutput(self, "QueueUrls", value=self.to_json_string(jobs.queues.urls()),
                      description="LEASEHOLD_QUEUE_URLS for the CLI")
        for table_role, table in jobs.tables.by_role.items():
            cdk.CfnOutput(self, f"{table_role.title()}Table", value=table.table_name)
        cdk.CfnOutput(self, "QueuePrefix", value=jobs.settings.queue_prefix)
        cdk.CfnOutput(self, "EventBusName", value=jobs.bus.name,
                      description="Put events here for triggers; job state events appear here")
