"""The Leasehold event bus: job state events out, user events in (for triggers).

The change-stream relay (:mod:`leasehold.cdk.relay`) publishes a ``leasehold.job`` event per
committed change of a job row to this bus (:mod:`leasehold.streams.relay`); other systems
subscribe with their own rules instead of polling.
Users put their own events on the same bus, and the trigger rule delivers those (never
Leasehold's own) to the trigger function.

The bus has no resource policy: only principals of this account that IAM allows may put
events. It is encrypted with an AWS owned key (EventBridge's default). The archive keeps the
user events only: they exist nowhere else, while job events can be rebuilt from the jobs
table and would multiply the archive's size by the number of transitions per job.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from constructs import Construct

from leasehold.events.publishing import SOURCE as JOB_EVENT_SOURCE

#: What the trigger rule and the archive match: every event except Leasehold's own job events,
#: so a job a trigger submits can never trigger itself through its own state events.
USER_EVENTS = events.EventPattern(source=events.Match.anything_but(JOB_EVENT_SOURCE))


class EventBus(Construct):
    """A custom EventBridge bus, with an archive of user events when ``archive_days`` > 0."""

    def __init__(self, scope: Construct, construct_id: str, *, name: str,
                 archive_days: int) -> None:
        super().__init__(scope, construct_id)
        self.bus = events.EventBus(
            self, "Bus", event_bus_name=name,
            description="Leasehold job state events (source leasehold.job) and user events "
                        "for triggers")
        self.archive: events.Archive | None = None
        if archive_days > 0:
            self.archive = self.bus.archive(
                "Archive", event_pattern=USER_EVENTS,
                description="User events on the Leasehold bus, for replay to triggers",
                retention=cdk.Duration.days(archive_days))

    @property
    def name(self) -> str:
        return self.bus.event_bus_name

    def grant_publish(self, grantee: iam.IGrantable) -> None:
        """``events:PutEvents`` on this bus only."""
        self.bus.grant_put_events_to(grantee)
