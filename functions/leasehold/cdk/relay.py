"""The change-stream relay: job state events published from the jobs table's DynamoDB Stream.

A Lambda event source mapping reads the stream (NEW_AND_OLD_IMAGES, :mod:`.tables`) and hands
each batch to ``leasehold.handlers.relay``, which publishes the events of the committed rows
(:mod:`leasehold.streams.relay`). With it deployed, nothing else publishes: every function and
ECS task runs with ``LEASEHOLD_EVENTS_FROM=stream`` (``LeaseholdConfig.settings``), so a
worker killed between its commit and its PutEvents no longer loses that batch's events.

A batch is read again until its events are all on the bus (the handler reports the first
record failed), bisected on errors to isolate a record that cannot be turned into an event,
and given up after :data:`RETRY_ATTEMPTS` tries or :data:`MAX_RECORD_AGE`: the on-failure
destination then gets the batch's shard and sequence-number range (not the records), and its
depth alarms. The stream keeps records 24 hours, so the record age leaves most of a day to
read that range again (docs/operations.md, "Change-stream relay").
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from leasehold.cdk.bus import EventBus
from leasehold.cdk.dlq import event_dlq
from leasehold.cdk.functions import LeaseholdFunction
from leasehold.cdk.nag import acknowledge

RELAY_HANDLER = "leasehold.handlers.relay.handler"
#: A batch is at most BATCH_SIZE events (fewer under ``publish=terminal``): ten PutEvents
#: requests of 10 entries, each with the sink's own retries, well within a minute.
TIMEOUT_SECONDS = 60
#: DynamoDB's default. A job's row changes at least three times (QUEUED, RUNNING, its
#: outcome; heartbeats add more), so one invocation carries up to about 30 jobs' changes.
BATCH_SIZE = 100
#: Lambda polls a shard about four times a second; waiting up to a second to fill a batch
#: bounds the relay at about one invocation per second per shard under moderate load (what
#: the relay costs) and adds at most a second to an event's delay.
BATCHING_WINDOW = cdk.Duration.seconds(1)
#: A failed batch blocks its shard while it is retried: bounded, with bisection isolating a
#: bad record in a few halvings (splits do not count as retries).
RETRY_ATTEMPTS = 10
#: Well under the stream's 24-hour retention, so the range the DLQ names can still be read.
MAX_RECORD_AGE = cdk.Duration.hours(6)
#: The four stream actions the event source mapping needs (the DynamoDB guide's policy for a
#: Lambda that reads a stream), all on this table's stream ARN.
STREAM_READ_ACTIONS = ("dynamodb:DescribeStream", "dynamodb:GetRecords",
                       "dynamodb:GetShardIterator", "dynamodb:ListStreams")


class Relay(Construct):
    """The relay function, its stream event source mapping and its on-failure DLQ."""

    def __init__(self, scope: Construct, construct_id: str, *, table: dynamodb.ITable,
                 bus: EventBus, code: lambda_.Code, environment: Mapping[str, str],
                 log_retention: logs.RetentionDays) -> None:
        super().__init__(scope, construct_id)
        assert table.table_stream_arn is not None  # the jobs definition has a stream
        self.dlq = event_dlq(self, "Dlq", of="the relay's stream event source mapping (the "
                                            "shard and sequence numbers of a batch given up on)")
        self.function = LeaseholdFunction(
            self, "relay", handler=RELAY_HANDLER, code=code, environment=environment,
            memory_mb=512, timeout_seconds=TIMEOUT_SECONDS, log_retention=log_retention,
            description="Leasehold change-stream relay: job state events from the jobs table",
        ).function
        # Read this one stream (not CDK's grant_stream_read, which adds ListStreams on "*"),
        # and put on this one bus. The handler's compose() makes no AWS call of its own: the
        # store and queues build their clients lazily. The stack grants it the work queues'
        # send too (it hands off enqueued jobs), and no table access.
        table.grant_stream(self.function, *STREAM_READ_ACTIONS)
        if table.encryption_key is not None:
            # A stream of a table under a customer-managed key is read through that key.
            table.encryption_key.grant_decrypt(self.function)
        bus.grant_publish(self.function)
        self.mapping = self.function.add_event_source_mapping(
            "Stream", event_source_arn=table.table_stream_arn,
            # Records not yet read when the mapping is created are relayed too.
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=BATCH_SIZE, max_batching_window=BATCHING_WINDOW,
            report_batch_item_failures=True, bisect_batch_on_error=True,
            retry_attempts=RETRY_ATTEMPTS, max_record_age=MAX_RECORD_AGE,
            # Grants the function's role sqs:SendMessage on this queue only.
            on_failure=sources.SqsDlq(self.dlq),
        )
        acknowledge(self.function, "Serverless-LambdaDLQ",
                    "Invoked synchronously by the stream event source mapping, where a function "
                    "DLQ never applies; the mapping's on-failure destination is the relay DLQ.")
