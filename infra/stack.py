"""The Leasehold stack: wires the constructs together and grants each function what it uses."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.api import Api
from infra.bus import EventBus
from infra.code import lambda_code
from infra.config import StackConfig
from infra.functions import LeaseholdFunction
from infra.monitoring import NAMESPACE, SERVICE, Monitoring
from infra.nag import acknowledge
from infra.queues import Queues
from infra.scheduling import TickerSweeper
from infra.tables import Tables
from infra.triggers import Triggers
from infra.workers import Workers

API_HANDLER = "leasehold.handlers.api.handler"


_RETENTION = {
    1: logs.RetentionDays.ONE_DAY, 3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS, 7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS, 30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS, 90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS, 365: logs.RetentionDays.ONE_YEAR,
    731: logs.RetentionDays.TWO_YEARS, 1827: logs.RetentionDays.FIVE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


def retention(days: int) -> logs.RetentionDays:
    """The shortest CloudWatch retention (it takes only certain values) of at least ``days``."""
    chosen = next((value for value in sorted(_RETENTION) if value >= days), max(_RETENTION))
    return _RETENTION[chosen]


class LeaseholdStack(cdk.Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig,
                 **kwargs: Any) -> None:
        super().__init__(scope, construct_id, **kwargs)
        config.validate()
        self.config = config
        settings = config.settings()
        log_retention = retention(config.log_retention_days)

        self.tables = Tables(self, "Tables", settings=settings, retain_data=config.retain_data)
        self.queues = Queues(self, "Queues", settings=settings, pools=config.pools,
                             retention_days=config.queue_retention_days,
                             retain_data=config.retain_data)
        assert settings.event_bus is not None  # StackConfig.settings names the bus
        self.bus = EventBus(self, "Events", name=settings.event_bus,
                            archive_days=config.event_archive_days)

        # The core's own serializer writes the environment, so every variable the functions
        # read is one Settings knows. AWS_REGION is set by Lambda itself (and reserved).
        # Queue URLs are derived at run time from this base, not listed: every function would
        # otherwise carry every queue's URL, and Lambda's 4 KB environment limit broke
        # deploys at about six pools.
        settings = settings.with_(queue_url_base=(
            f"https://sqs.{cdk.Aws.REGION}.{cdk.Aws.URL_SUFFIX}/{cdk.Aws.ACCOUNT_ID}"))
        environment = {k: v for k, v in settings.to_env().items() if k != "AWS_REGION"}
        environment.update({
            "POWERTOOLS_SERVICE_NAME": SERVICE,
            "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
        })
        code = lambda_code(mode=config.bundling, task_packages=config.task_packages)

        self.workers = Workers(self, "Workers", pools=config.pools, queues=self.queues,
                               tables=self.tables, code=code, environment=environment,
                               log_retention=log_retention)
        self.scheduling = TickerSweeper(self, "TickerSweeper", queues=self.queues,
                                        tables=self.tables, code=code, environment=environment,
                                        log_retention=log_retention)
        # Only the API names tenants, so only it carries the operator's mapping.
        tenant_map = config.tenant_map_json()
        api_environment = {**environment, **(
            {"LEASEHOLD_TENANT_MAP": tenant_map} if tenant_map else {})}
        api_fn = LeaseholdFunction(
            self, "ApiFunction", handler=API_HANDLER, code=code, environment=api_environment,
            memory_mb=config.api_memory_mb, timeout_seconds=config.api_timeout_seconds,
            log_retention=log_retention, description="Leasehold REST API",
        ).function
        self.tables.grant_data(api_fn)
        self.triggers = Triggers(self, "Triggers", bus=self.bus, queues=self.queues,
                                 tables=self.tables, code=code, environment=environment,
                                 log_retention=log_retention)
        # Submissions hand off, redrives re-send, admission control reads queue depths,
        # and dead-letter listing reads the DLQs.
        self.queues.grant_send(api_fn)
        self.queues.grant_inspect(api_fn)
        self.queues.grant_consume(api_fn, self.queues.dead.values())
        # GET /stats reads each queue's oldest-message age, which SQS publishes only to
        # CloudWatch. Its own policy, so that the acknowledgment below covers this alone.
        assert api_fn.role is not None  # LeaseholdFunction gives every function its role
        stats_policy = iam.Policy(
            self, "ApiQueueAgeMetrics", roles=[api_fn.role],
            statements=[iam.PolicyStatement(actions=["cloudwatch:GetMetricStatistics"],
                                            resources=["*"])])
        acknowledge(stats_policy, "AwsSolutions-IAM5[Resource::*]",
                    "cloudwatch:GetMetricStatistics supports no resource-level permissions "
                    "(the IAM service authorization reference lists no resource type); it "
                    "only reads metrics, for GET /stats' oldest_age_seconds.")
        acknowledge(api_fn, "Serverless-LambdaDLQ",
                    "Invoked synchronously by API Gateway; errors are returned to the caller.")
        functions = (*self.workers.functions.values(), *self.scheduling.functions.values(),
                     api_fn, self.triggers.function)
        for grantee in functions:
            self.tables.acknowledge_index_grants(grantee.role)  # type: ignore[arg-type]
        # Every process that changes job state publishes the change (LEASEHOLD_EVENT_BUS).
        publishers: list[iam.IGrantable] = [*functions]
        publishers += [service.task_definition.task_role
                       for service in self.workers.services.values()]
        for publisher in publishers:
            self.bus.grant_publish(publisher)
        self.api = Api(self, "Api", handler=api_fn, log_retention=log_retention,
                       throttle_rate=config.throttle_rate, throttle_burst=config.throttle_burst,
                       cognito_user_pool_arn=config.cognito_user_pool_arn, waf=config.waf)
        self.api_function = api_fn

        self.monitoring = Monitoring(
            self, "Monitoring", key=self.queues.key, alarm_email=config.alarm_email,
            work_queues={q.node.id: q for q in self.queues.work.values()},
            dead_letter_queues={
                **{q.node.id: q for q in self.queues.dead.values()},
                "scheduling-dlq": self.scheduling.dlq,
                "trigger-dlq": self.triggers.dlq,
            },
            workers=self.workers.functions, ticker=self.scheduling.ticker,
            sweeper=self.scheduling.sweeper, trigger=self.triggers.function,
            api_function=api_fn, api=self.api.rest_api,
        )

        cdk.CfnOutput(self, "ApiUrl", value=self.api.url, description="The REST API's base URL")
        cdk.CfnOutput(self, "AlarmTopicArn", value=self.monitoring.topic.topic_arn)
        cdk.CfnOutput(self, "DashboardName", value=self.monitoring.dashboard.dashboard_name)
        cdk.CfnOutput(self, "QueueUrls", value=self.to_json_string(self.queues.urls()),
                      description="LEASEHOLD_QUEUE_URLS for the CLI")
        for table_role, table in self.tables.by_role.items():
            cdk.CfnOutput(self, f"{table_role.title()}Table", value=table.table_name)
        cdk.CfnOutput(self, "QueuePrefix", value=settings.queue_prefix)
        cdk.CfnOutput(self, "EventBusName", value=self.bus.name,
                      description="Put events here for triggers; job state events appear here")
