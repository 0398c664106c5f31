"""Consuming SQS the way Lambda's event source does: batches with partial failures.

The Lambda handler and the polling workers (local runtime, ECS) share one record handler run
by Powertools' batch processor, so one bad record never fails its batch.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Sequence
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from leasehold.aws.queues import Message, Received
from leasehold.errors import StaleMessage
from leasehold.lifecycle.worker import Delivery, Outcome, Worker
from leasehold.settings import FUNCTION_TIMEOUT_RESERVE_SECONDS

log = logging.getLogger(__name__)


#: What a record needs beyond its job's timeout: leasing it, and recording the outcome of an
#: attempt that timed out. Half the reserve a job's timeout keeps from the function timeout
#: (``Settings.job_timeout_limit``), so the first record of an invocation always fits.
FINISH_SECONDS = FUNCTION_TIMEOUT_RESERVE_SECONDS / 2


class NotStarted(Exception):
    """Too little time left in this invocation to run the job: handed back unstarted."""


class Batch:
    """One batch of records, run one after another, as Lambda's SQS event source delivers it.

    With a Lambda context it watches the invocation's remaining time: a job that could not
    finish before the function times out is not started but handed back (a batch item
    failure made visible again at once), so the invocation never dies mid-job, which would
    count as a crash and leave the rest of the batch waiting out the visibility timeout.
    Each heartbeat keeps the running message *and the records after it* invisible: until the
    invocation can end (Lambda deletes what succeeded only then), and never less than two
    leases (a polling worker has no deadline).
    """

    def __init__(self, worker: Worker, records: Sequence[dict[str, Any]],
                 context: Any = None) -> None:
        self.worker = worker
        self._remaining_ms = getattr(context, "get_remaining_time_in_millis", None)
        #: Receipt handles of the records not yet finished, by queue URL. Heartbeats read it
        #: (from a job's own thread too, through ``ctx.heartbeat``), so under a lock.
        self._waiting: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self._urls: dict[str, str] = {}
        self.unstarted: list[tuple[str, str]] = []
        #: Whether a record of this batch has run: the first one always does, since an
        #: invocation never has more time than at its start, and handing back a job that
        #: fits no invocation would only churn it (submission refuses such timeouts).
        self._ran = False
        for record in records:
            url = self._url(record.get("eventSourceARN"))
            if url:
                self._waiting.setdefault(url, []).append(record["receiptHandle"])

    def _url(self, arn: str | None) -> str | None:
        if not arn:
            return None
        if arn not in self._urls:
            self._urls[arn] = self.worker.app.queues.url_from_arn(arn)
        return self._urls[arn]

    def seconds_left(self) -> float | None:
        """Until the function times out; None when there is no such deadline (a poller)."""
        return None if self._remaining_ms is None else self._remaining_ms() / 1000

    def hold_seconds(self) -> int:
        """How long a heartbeat keeps the batch's messages invisible."""
        hold = 2 * self.worker.app.settings.lease_seconds
        left = self.seconds_left()
        if left is not None:
            hold = max(hold, left + FINISH_SECONDS)
        return math.ceil(hold)

    def keep_invisible(self) -> None:
        seconds = self.hold_seconds()
        with self._lock:
            waiting = {url: list(handles) for url, handles in self._waiting.items() if handles}
        for url, handles in waiting.items():
            self.worker.app.queues.extend_all(url, handles, seconds)

    def handle(self, record: SQSRecord) -> str:
        url = self._url(record.event_source_arn)
        try:
            timeout = Message.parse(record.body).timeout
        except StaleMessage:
            timeout = None  # the worker acknowledges it
        try:
            left = self.seconds_left()
            if self._ran and left is not None and timeout is not None and \
                    left < timeout + FINISH_SECONDS:
                if url:
                    self.unstarted.append((url, record.receipt_handle))
                raise NotStarted(f"{left:.0f}s left in this invocation; the job may run for "
                                 f"{timeout:g}s: handed back unstarted")
            delivery = Delivery(record.body, url, record.receipt_handle,
                                keep_invisible=self.keep_invisible if url else None,
                                message_id=record.message_id)
            self._ran = True
            return self.worker.process(delivery).value
        finally:
            with self._lock:
                if url and record.receipt_handle in self._waiting.get(url, ()):
                    self._waiting[url].remove(record.receipt_handle)

    def hand_back(self) -> None:
        """Make the unstarted records visible again, for an invocation with time to run them."""
        by_url: dict[str, list[str]] = {}
        for url, handle in self.unstarted:
            by_url.setdefault(url, []).append(handle)
        for url, handles in by_url.items():
            try:
                self.worker.app.queues.extend_all(url, handles, 0)
            except Exception:  # they come back after their visibility timeout instead
                log.warning("could not hand back %d message(s)", len(handles), exc_info=True)


def process_event(worker: Worker, event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Handle a Lambda SQS event; returns ``{"batchItemFailures": [...]}``."""
    batch = Batch(worker, event.get("Records", []), context)
    processor = BatchProcessor(event_type=EventType.SQS)
    try:
        # What the records' jobs defer (their state events) is done when the batch ends,
        # before the response reports them done (Lambda deletes them, or ``consume`` does).
        with worker.app.batch():
            response = process_partial_response(
                event=event, record_handler=batch.handle, processor=processor,
                context=context)
    finally:  # also when every record failed and Powertools raises
        batch.hand_back()
        if batch.unstarted:
            log.info("handed back %d record(s) that could not finish in this invocation",
                     len(batch.unstarted))
    return dict(response)


def as_event(messages: Sequence[Received], queue_arn: str) -> dict[str, Any]:
    """The SQS event Lambda would deliver for these messages."""
    return {"Records": [
        {
            "messageId": m.message_id, "receiptHandle": m.receipt_handle, "body": m.body,
            "attributes": {"ApproximateReceiveCount": str(m.receive_count),
                           **({"MessageGroupId": m.group} if m.group else {})},
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


__all__ = ["Batch", "Outcome", "as_event", "consume", "process_event"]
