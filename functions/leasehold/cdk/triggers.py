"""Event triggers on AWS: a rule on the Leasehold bus delivers user events to the trigger function.

The rule matches broadly (every event but Leasehold's own job events); the function applies
each stored trigger's pattern (:func:`leasehold.events.triggers.dispatch`). Unlike a missed tick, a
lost event is not made good by the next one, so delivery is retried for longer than the
ticker's and an event that still fails is kept, with its error, in a DLQ for redrive.
Retrying is safe: a job's id derives from (trigger, event id), so a redelivery creates nothing.
"""

from __future__ import annotations

from collections.abc import Mapping

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_destinations as destinations
from aws_cdk import aws_logs as logs
from constructs import Construct

from leasehold.cdk.bus import USER_EVENTS, EventBus
from leasehold.cdk.dlq import event_dlq
from leasehold.cdk.functions import LeaseholdFunction
from leasehold.cdk.nag import acknowledge
from leasehold.cdk.queues import Queues
from leasehold.cdk.tables import Tables

TRIGGER_HANDLER = "leasehold.handlers.trigger.handler"
TIMEOUT_SECONDS = 60
#: EventBridge's delivery retries (throttled or unavailable function) and Lambda's own retries
#: of a failed run; both stop at the same age.
DELIVERY_RETRIES = 10
INVOKE_RETRIES = 2
MAX_EVENT_AGE = cdk.Duration.hours(6)


class Triggers(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, bus: EventBus, queues: Queues,
                 tables: Tables, code: lambda_.Code, environment: Mapping[str, str],
                 log_retention: logs.RetentionDays) -> None:
        super().__init__(scope, construct_id)
        self.dlq = event_dlq(self, "Dlq", of="the trigger rule's target and of the trigger "
                                            "function's async invocations")
        self.function = LeaseholdFunction(
            self, "trigger", handler=TRIGGER_HANDLER, code=code, environment=environment,
            memory_mb=512, timeout_seconds=TIMEOUT_SECONDS, log_retention=log_retention,
            description="Leasehold event triggers: submits the jobs of matching triggers",
        ).function
        self.function.configure_async_invoke(
            retry_attempts=INVOKE_RETRIES, max_event_age=MAX_EVENT_AGE,
            on_failure=destinations.SqsDestination(self.dlq))
        acknowledge(self.function, "Serverless-LambdaDLQ",
                    "Failed async invocations go to an on-failure destination (the same "
                    "queue), which records the error as well as the event.")
        self.rule = events.Rule(
            self, "UserEvents", event_bus=bus.bus, event_pattern=USER_EVENTS,
            description="Delivers user events (not Leasehold's job events) to the triggers")
        self.rule.add_target(targets.LambdaFunction(
            self.function, dead_letter_queue=self.dlq, retry_attempts=DELIVERY_RETRIES,
            max_event_age=MAX_EVENT_AGE))
        # A trigger reads its definitions (coordination table), creates jobs and hands them off.
        tables.grant_data(self.function)
        queues.grant_send(self.function)
