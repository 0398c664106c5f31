"""Operational figures: jobs by state for a tenant and the depth of every queue."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from leasehold.aws.definitions import queues
from leasehold.clock import to_datetime
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy.counters import counts
from leasehold.tenancy.slots import orphans

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class QueueDepth:
    pool: str
    priority: str
    queue: str
    visible: int
    in_flight: int
    delayed: int
    dead_letters: int
    oldest_age_seconds: float | None


def _attributes(app: Leasehold, url: str) -> dict[str, str]:
    names: Any = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                  "ApproximateNumberOfMessagesDelayed"]
    response: Any = app.clients.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)
    return dict(response["Attributes"])


def _oldest_age(app: Leasehold, queue: str) -> float | None:
    """SQS exposes the age of the oldest message only as a CloudWatch metric."""
    now = to_datetime(app.now())
    try:
        response = app.clients.client("cloudwatch").get_metric_statistics(
            Namespace="AWS/SQS", MetricName="ApproximateAgeOfOldestMessage",
            Dimensions=[{"Name": "QueueName", "Value": queue}],
            StartTime=now - timedelta(minutes=5), EndTime=now, Period=60,
            Statistics=["Maximum"])
    except Exception:  # no CloudWatch (an emulator without it, or no permission)
        log.debug("no age metric for %s", queue, exc_info=True)
        return None
    points = sorted(response.get("Datapoints", []), key=lambda p: p["Timestamp"])
    return float(points[-1]["Maximum"]) if points else None


def queue_depths(app: Leasehold) -> list[QueueDepth]:
    out = []
    for queue in queues(app.settings):
        main = _attributes(app, app.queues.url(queue.pool, queue.priority))
        dlq = _attributes(app, app.queues.dlq_url(queue.pool, queue.priority))
        name = queue.name(app.settings)
        out.append(QueueDepth(
            pool=queue.pool, priority=queue.priority, queue=name,
            visible=int(main.get("ApproximateNumberOfMessages", 0)),
            in_flight=int(main.get("ApproximateNumberOfMessagesNotVisible", 0)),
            delayed=int(main.get("ApproximateNumberOfMessagesDelayed", 0)),
            dead_letters=int(dlq.get("ApproximateNumberOfMessages", 0)),
            oldest_age_seconds=_oldest_age(app, name)))
    return out


__all__ = ["QueueDepth", "counts", "orphans", "queue_depths"]
