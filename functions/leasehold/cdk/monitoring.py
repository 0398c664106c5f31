"""A CloudWatch dashboard and alarms to an SNS topic.

AWS service metrics (SQS, Lambda, API Gateway) work from the first deploy. The Leasehold
metrics (lease expiries, retries, schedule lateness, job outcomes) are the EMF metrics the
functions publish with Powertools under :data:`NAMESPACE`; their names are listed here once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from leasehold.cdk.nag import acknowledge

#: POWERTOOLS_METRICS_NAMESPACE and POWERTOOLS_SERVICE_NAME of every function; Powertools
#: adds ``service`` as the metrics' one dimension.
NAMESPACE = "Leasehold"
SERVICE = "leasehold"
#: The EMF metrics (Count unless noted) the dashboard charts.
JOB_METRICS = ("JobsSubmitted", "JobsSucceeded", "JobsRetried", "JobsDead", "LeasesExpired")
LATENESS_METRIC = "ScheduleLatenessMs"  # Milliseconds between a job's run_at and its start
#: A job waiting this long in a queue means the pool's consumers cannot keep up.
QUEUE_AGE_ALARM_SECONDS = 15 * 60
#: The relay reading stream records this old (for 5 minutes) means job state events lag by
#: as much: it is failing and retrying a batch, or cannot keep up with the table's writes.
ITERATOR_AGE_ALARM_SECONDS = 5 * 60
PERIOD = cdk.Duration.minutes(1)


def leasehold_metric(name: str, statistic: str = "Sum") -> cloudwatch.Metric:
    return cloudwatch.Metric(namespace=NAMESPACE, metric_name=name, statistic=statistic,
                             dimensions_map={"service": SERVICE}, period=PERIOD)


class Monitoring(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, key: kms.IKey,
                 alarm_email: str | None, work_queues: Mapping[str, sqs.IQueue],
                 dead_letter_queues: Mapping[str, sqs.IQueue],
                 workers: Mapping[str, lambda_.IFunction],
                 ticker: lambda_.IFunction, sweeper: lambda_.IFunction,
                 trigger: lambda_.IFunction, relay: lambda_.IFunction,
                 api_function: lambda_.IFunction,
                 api: apigw.RestApi | apigwv2.HttpApi) -> None:
        super().__init__(scope, construct_id)
        # Alarm notifications may carry resource names; encrypt them with the stack's CMK.
        self.topic = sns.Topic(self, "Alarms", master_key=key, enforce_ssl=True,
                               display_name="Leasehold alarms")
        # enforce_ssl gives the topic a policy whose only statement denies plain HTTP; it
        # replaces SNS's default policy, so without this statement CloudWatch may not publish
        # and every alarm action fails silently. Only this account's alarms may.
        stack = cdk.Stack.of(self)
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="AllowCloudWatchAlarms",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["sns:Publish"], resources=[self.topic.topic_arn],
            conditions={
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {"aws:SourceArn": stack.format_arn(
                    service="cloudwatch", resource="alarm", resource_name="*",
                    arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME)},
            }))
        # CloudWatch publishes to an encrypted topic only if the key lets it use the key.
        key.grant(iam.ServicePrincipal("cloudwatch.amazonaws.com"),
                  "kms:GenerateDataKey", "kms:Decrypt")
        self.alarms: list[cloudwatch.Alarm] = []
        action = actions.SnsAction(self.topic)
        dead_letter_queues = dict(dead_letter_queues)
        if alarm_email:
            # Notifications SNS could not deliver (bounces, throttling) are kept, not lost.
            undelivered = sqs.Queue(
                self, "UndeliveredAlarms", encryption=sqs.QueueEncryption.SQS_MANAGED,
                enforce_ssl=True, retention_period=cdk.Duration.days(14))
            for rule in ("AwsSolutions-SQS3", "Serverless-SQSRedrivePolicy"):
                acknowledge(undelivered, rule,
                            "This queue is itself the dead-letter queue of the alarm e-mail "
                            "subscription.")
            self.topic.add_subscription(subscriptions.EmailSubscription(
                alarm_email, dead_letter_queue=undelivered))
            # Its alarm still shows in the console (and other subscribers) when e-mail fails.
            dead_letter_queues["undelivered-alarms"] = undelivered

        def alarm(name: str, metric: cloudwatch.IMetric, threshold: float, description: str,
                  *, evaluation_periods: int = 1, datapoints: int | None = None,
                  comparison: cloudwatch.ComparisonOperator =
                  cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                  missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
                  ) -> None:
            created = cloudwatch.Alarm(
                self, name, metric=metric, threshold=threshold, alarm_description=description,
                evaluation_periods=evaluation_periods, datapoints_to_alarm=datapoints,
                comparison_operator=comparison, treat_missing_data=missing)
            created.add_alarm_action(action)
            created.add_ok_action(action)
            self.alarms.append(created)

        for name, queue in dead_letter_queues.items():
            alarm(f"DeadLetters-{name}",
                  queue.metric_approximate_number_of_messages_visible(
                      period=PERIOD, statistic="Maximum"),
                  1, f"Messages in DLQ {name}: DEAD jobs or poison messages. "
                  "See docs/operations.md#dead-letters.")
        for name, queue in work_queues.items():
            alarm(f"QueueAge-{name}",
                  queue.metric_approximate_age_of_oldest_message(
                      period=PERIOD, statistic="Maximum"),
                  QUEUE_AGE_ALARM_SECONDS,
                  f"The oldest job in {name} has waited 15 minutes: the pool cannot keep up. "
                  "See docs/operations.md#queue-age.", evaluation_periods=5, datapoints=5)
        for label, fn in (("Ticker", ticker), ("Sweeper", sweeper)):
            alarm(f"{label}Errors", fn.metric_errors(period=cdk.Duration.minutes(5)), 2,
                  f"The {label.lower()} failed twice in 5 minutes. "
                  "See docs/operations.md#ticker-or-sweeper-failing.", evaluation_periods=2,
                  datapoints=2)
            # No invocations at all is as bad as failures: due jobs stop being promoted.
            alarm(f"{label}Stopped", fn.metric_invocations(period=cdk.Duration.minutes(5)), 1,
                  f"The {label.lower()} has not run for 10 minutes. "
                  "See docs/operations.md#ticker-or-sweeper-failing.",
                  evaluation_periods=2, datapoints=2,
                  comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
                  missing=cloudwatch.TreatMissingData.BREACHING)
        for pool, fn in workers.items():
            alarm(f"WorkerThrottles-{pool}",
                  fn.metric_throttles(period=cdk.Duration.minutes(5)), 10,
                  "The worker is throttled: raise its concurrency or the account limit. "
                  "See docs/operations.md#scaling-pools.", evaluation_periods=3, datapoints=3)
        # Failed trigger runs also reach the trigger DLQ (alarmed above); errors show sooner.
        alarm("TriggerErrors", trigger.metric_errors(period=cdk.Duration.minutes(5)), 5,
              "The trigger function failed: events are retried, then kept in the trigger DLQ. "
              "See docs/operations.md#triggers-failing.", evaluation_periods=2, datapoints=2)
        # IteratorAge is in milliseconds: the age of a batch's last record when it is read.
        alarm("RelayIteratorAge",
              relay.metric("IteratorAge", period=PERIOD, statistic="Maximum"),
              ITERATOR_AGE_ALARM_SECONDS * 1000,
              "The relay is reading stream records 5 minutes old: job state events lag. "
              "See docs/operations.md#change-stream-relay.", evaluation_periods=5, datapoints=5)
        alarm("Api5xx", api.metric_server_error(period=cdk.Duration.minutes(5)), 5,
              "The API answered 5xx. See docs/operations.md#api-errors.",
              evaluation_periods=2, datapoints=2)
        alarm("ApiFunctionErrors", api_function.metric_errors(period=cdk.Duration.minutes(5)), 5,
              "The API function failed. See docs/operations.md#api-errors.",
              evaluation_periods=2, datapoints=2)
        alarm("LeasesExpiring", leasehold_metric("LeasesExpired"), 20,
              "Many leases expired: workers are crashing or heartbeats fail. "
              "See docs/operations.md#lease-expiries.", evaluation_periods=5, datapoints=3)

        self.dashboard = self._dashboard(work_queues, dead_letter_queues,
                                         [*workers.values(), ticker, sweeper, trigger, relay],
                                         api)
        self.dashboard.add_widgets(cloudwatch.GraphWidget(
            title="Change-stream relay: iterator age (ms, max), the lag of job state events",
            left=[relay.metric("IteratorAge", period=PERIOD, statistic="Maximum")],
            width=8, height=6))

    def _dashboard(self, work_queues: Mapping[str, sqs.IQueue],
                   dead_letter_queues: Mapping[str, sqs.IQueue],
                   functions: Sequence[lambda_.IFunction],
                   api: apigw.RestApi | apigwv2.HttpApi) -> cloudwatch.Dashboard:
        def graph(title: str, metrics: Sequence[cloudwatch.IMetric],
                  width: int = 8) -> cloudwatch.GraphWidget:
            return cloudwatch.GraphWidget(title=title, left=list(metrics), width=width, height=6)

        dashboard = cloudwatch.Dashboard(self, "Dashboard",
                                         default_interval=cdk.Duration.hours(3))
        dashboard.add_widgets(
            graph("Jobs (throughput and outcomes)",
                  [leasehold_metric(name) for name in JOB_METRICS], width=12),
            graph("Jobs delivered to workers (SQS deletes)",
                  [q.metric_number_of_messages_deleted(period=PERIOD, label=name)
                   for name, q in work_queues.items()], width=12),
        )
        dashboard.add_widgets(
            graph("Queue age (oldest message, s)",
                  [q.metric_approximate_age_of_oldest_message(period=PERIOD, label=name,
                                                              statistic="Maximum")
                   for name, q in work_queues.items()]),
            graph("DLQ depth",
                  [q.metric_approximate_number_of_messages_visible(period=PERIOD, label=name,
                                                                   statistic="Maximum")
                   for name, q in dead_letter_queues.items()]),
            graph("Lease expiries and retries",
                  [leasehold_metric("LeasesExpired"), leasehold_metric("JobsRetried")]),
        )
        dashboard.add_widgets(
            graph("Schedule lateness (ms)",
                  [leasehold_metric(LATENESS_METRIC, "p50"),
                   leasehold_metric(LATENESS_METRIC, "p99"),
                   leasehold_metric(LATENESS_METRIC, "Maximum")]),
            graph("API requests, 4xx (incl. 429), 5xx",
                  [api.metric_count(period=PERIOD), api.metric_client_error(period=PERIOD),
                   api.metric_server_error(period=PERIOD)]),
            graph("Functions: errors and throttles",
                  [m for fn in functions
                   for m in (fn.metric_errors(period=PERIOD), fn.metric_throttles(period=PERIOD))]),
        )
        return dashboard
