"""The ticker and the sweeper: EventBridge ``rate(1 minute)`` rules, each with retries and a DLQ.

A missed tick is harmless (the next one catches up, and both functions are idempotent), so
retries are few and events older than a few ticks are dropped to the DLQ rather than piled up.
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

from leasehold.cdk.dlq import event_dlq
from leasehold.cdk.functions import LeaseholdFunction
from leasehold.cdk.nag import acknowledge
from leasehold.cdk.queues import Queues
from leasehold.cdk.tables import Tables

TICKER_HANDLER = "leasehold.handlers.ticker.handler"
SWEEPER_HANDLER = "leasehold.handlers.sweeper.handler"
#: A tick runs well within a minute; the timeout bounds a stuck run below the next two ticks.
TIMEOUT_SECONDS = 120


class TickerSweeper(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, queues: Queues, tables: Tables,
                 code: lambda_.Code, environment: Mapping[str, str],
                 log_retention: logs.RetentionDays) -> None:
        super().__init__(scope, construct_id)
        self.dlq = event_dlq(self, "Dlq", of="the ticker and sweeper (EventBridge targets "
                                            "and Lambda async invocations)")
        self.functions: dict[str, lambda_.Function] = {}
        self.rules: dict[str, events.Rule] = {}
        for name, handler in (("ticker", TICKER_HANDLER), ("sweeper", SWEEPER_HANDLER)):
            fn = LeaseholdFunction(
                self, name, handler=handler, code=code, environment=environment,
                memory_mb=512, timeout_seconds=TIMEOUT_SECONDS, log_retention=log_retention,
                description=f"Leasehold {name}, every minute",
            ).function
            # Lambda's own async retries would overlap the next tick, so a failed run is not
            # retried but recorded (with its error) in the DLQ for inspection.
            fn.configure_async_invoke(retry_attempts=0, max_event_age=cdk.Duration.minutes(5),
                                      on_failure=destinations.SqsDestination(self.dlq))
            acknowledge(fn, "Serverless-LambdaDLQ",
                        "Failed async invocations go to an on-failure destination (the same "
                        "queue), which records the error as well as the event.")
            rule = events.Rule(
                self, f"{name}-schedule", schedule=events.Schedule.rate(cdk.Duration.minutes(1)),
                description=f"Runs the Leasehold {name} once a minute")
            rule.add_target(targets.LambdaFunction(
                fn, dead_letter_queue=self.dlq, retry_attempts=2,
                max_event_age=cdk.Duration.minutes(5)))
            tables.grant_data(fn)
            queues.grant_send(fn)
            self.functions[name] = fn
            self.rules[name] = rule

    @property
    def ticker(self) -> lambda_.Function:
        return self.functions["ticker"]

    @property
    def sweeper(self) -> lambda_.Function:
        return self.functions["sweeper"]
