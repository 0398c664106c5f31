"""The Leasehold stack of this repository: one user of the :class:`leasehold.cdk.Leasehold`
construct, deploying the example tasks (or the ones named in context), plus the outputs the
CLI and the console read."""

from __future__ import annotations

import hashlib
import re
from typing import Any

import aws_cdk as cdk
from constructs import Construct

from leasehold.cdk import Leasehold, LeaseholdConfig
from leasehold.cdk.construct import API_HANDLER

__all__ = ["API_HANDLER", "LeaseholdStack", "unique_id"]

#: The construct's id in this stack; it is left out of the logical ids (see below).
CONSTRUCT_ID = "Leasehold"


class LeaseholdStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: LeaseholdConfig,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.leasehold = jobs = Leasehold(self, CONSTRUCT_ID, config=config)
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

    def _allocate_logical_id(self, cfn_element: cdk.CfnElement) -> str:
        # Before the Leasehold construct existed, every resource sat directly in this stack.
        # Keeping the logical ids they had spares an existing deployment the replacement of
        # every resource, which fails anyway for the tables (their names are fixed).
        scopes = cfn_element.node.scopes
        path = [scope.node.id for scope in scopes[scopes.index(self) + 1:]]
        if len(path) > 1 and path[0] == CONSTRUCT_ID:
            path = path[1:]
        return unique_id(path)


def unique_id(path: list[str]) -> str:
    """CDK's logical id for a construct path below its stack (``makeUniqueId`` in
    aws-cdk-lib's ``core/lib/private/uniqueid.ts``): the path's alphanumerics without
    ``Default``, ``Resource`` and repeats, then 8 hex digits of the path's MD5."""
    path = [part for part in path if part != "Default"]
    if len(path) == 1 and len(alphanumeric := re.sub(r"[^A-Za-z0-9]", "", path[0])) <= 255:
        return alphanumeric
    digest = hashlib.md5("/".join(path).encode(), usedforsecurity=False).hexdigest()
    human: list[str] = []
    for part in path:
        if not human or not human[-1].endswith(part):
            human.append(part)
    readable = "".join(re.sub(r"[^A-Za-z0-9]", "", part) for part in human
                       if part != "Resource")[:240]
    return readable + digest[:8].upper()
