"""Consuming SQS the way Lambda's event source does: batches with partial failures.

The Lambda handler and the polling workers (local runtime, ECS) share one record handler run
by Powertools' batch processor, so one bad record never fails its batch.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from leasehold.aws.queues import Queues, Received
from leasehold.lifecycle.worker import Delivery, Outcome, Worker

log = logging.getLogger(__name__)


def record_handler(worker: Worker, queues: Queues | None = None):  # type: ignore[no-untyped-def]
    def handle(record: SQSRecord) -> str:
        url = None
        if queues is not None and record.event_source_arn:
            url = queues.url_from_arn(record.event_source_arn)
        return worker.process(Delivery(record.body, url, record.receipt_handle)).value

    return handle


def process_event(worker: Worker, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Handle a Lambda SQS event; returns ``{"batchItemFailures": [...]}``."""
    processor = BatchProcessor(event_type=EventType.SQS)
    response = process_partial_response(
        event=event, record_handler=record_handler(worker, worker.app.queues),
        processor=processor, context=context,
    )
    return dict(response)


def as_event(messages: Sequence[Received], queue_arn: str) -> dict[str, Any]:
    """The SQS event Lambda would deliver for these messages."""
    return {"Records": [
        {
            "messageId": m.message_id, "receiptHandle": m.receipt_handle, "body": m.body,
            "attributes": {"ApproximateReceiveCount": str(m.receive_count)},
            "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
            "eventSourceARN": queue_arn, "awsRegion": "us-east-1",
        }
        for m in messages
    ]}


def consume(worker: Worker, messages: Sequence[Received]) -> dict[str, int]:
    """Process polled messages as one Lambda batch, then delete the ones that succeeded."""
    if not messages:
        return {}
    url = messages[0].queue_url
    arn = "arn:aws:sqs:local:000000000000:" + url.rstrip("/").rsplit("/", 1)[-1]
    response = process_event(worker, as_event(messages, arn))
    failed = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
    done = [m.receipt_handle for m in messages if m.message_id not in failed]
    worker.app.queues.delete(url, done)
    counts = {"processed": len(done), "failed": len(failed)}
    return counts


__all__ = ["Outcome", "as_event", "consume", "process_event"]
