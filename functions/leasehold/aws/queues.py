"""SQS: one queue per pool and priority, each with its DLQ. Messages carry (job_id, epoch) only."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from leasehold.aws.clients import Clients
from leasehold.aws.definitions import queue_name
from leasehold.errors import StaleMessage
from leasehold.settings import Settings

MAX_DELAY_SECONDS = 900  # the SQS limit
MAX_BATCH_ENTRIES = 10  # SendMessageBatch's limit


@dataclass(frozen=True)
class Message:
    """A hand-off: which job, at which epoch, and (for a delayed job) when it is due.

    Never the payload: that stays in DynamoDB.
    """

    job_id: str
    epoch: int
    #: When the job is due (epoch ms). SQS delays are whole seconds and rounded down, so the
    #: message may arrive up to a second early; the worker waits out the rest.
    run_at: int | None = None
    #: The job's attempt timeout (seconds): a Lambda worker starts the job only if its
    #: invocation has that much time left, without reading the row first.
    timeout: float | None = None
    #: The job's flow-control gate (``leasehold.core.flowcontrol``), so that the lease takes
    #: its slot in the same write without reading the row first; None for most jobs.
    gate: dict[str, Any] | None = None
    #: When the sender sent it (epoch ms, the sender's clock), on a message sent *before*
    #: its row is put (send-first, :mod:`leasehold.lifecycle.handoff`): a worker that finds
    #: no row keeps such a message until ``handoff.ORPHAN_GRACE_MS`` after it, then drops it.
    sent_at: int | None = None

    def body(self) -> str:
        data: dict[str, object] = {"job_id": self.job_id, "epoch": self.epoch}
        if self.run_at is not None:
            data["run_at"] = self.run_at
        if self.timeout is not None:
            data["timeout"] = self.timeout
        if self.gate is not None:
            data["gate"] = self.gate
        if self.sent_at is not None:
            data["sent"] = self.sent_at
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def parse(cls, body: str) -> Message:
        """A hand-off message; anything else is stale (acknowledged, never retried)."""
        try:
            data = json.loads(body)
            run_at, timeout = data.get("run_at"), data.get("timeout")
            gate, sent = data.get("gate"), data.get("sent")
            return cls(str(data["job_id"]), int(data["epoch"]),
                       None if run_at is None else int(run_at),
                       None if timeout is None else float(timeout),
                       gate if isinstance(gate, dict) else None,
                       None if sent is None else int(sent))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StaleMessage(f"not a Leasehold message: {body[:100]!r}") from exc


@dataclass(frozen=True)
class Received:
    queue_url: str
    receipt_handle: str
    message_id: str
    body: str
    receive_count: int
    #: The message group: the job's tenant (see :meth:`Queues.send`).
    group: str | None = None


class Queues:
    def __init__(self, clients: Clients, settings: Settings | None = None) -> None:
        self.settings = settings or clients.settings
        self._clients = clients
        self._urls: dict[str, str] = dict(self.settings.queue_urls)
        self._lock = threading.Lock()

    @property
    def _sqs(self) -> Any:
        return self._clients.sqs

    def url_by_name(self, name: str) -> str:
        with self._lock:
            url = self._urls.get(name)
        if url is None and self.settings.queue_url_base:
            # On AWS a queue's URL is <base>/<name>: no environment entry per queue, no call.
            url = f"{self.settings.queue_url_base.rstrip('/')}/{name}"
        if url is None:
            url = self._sqs.get_queue_url(QueueName=name)["QueueUrl"]
            with self._lock:
                self._urls[name] = url
        return url

    def url(self, pool: str, priority: str) -> str:
        return self.url_by_name(queue_name(self.settings.queue_prefix, pool, priority))

    def dlq_url(self, pool: str, priority: str) -> str:
        return self.url_by_name(queue_name(self.settings.queue_prefix, pool, priority) + "-dlq")

    def send(self, pool: str, priority: str, message: Message, delay_seconds: float = 0, *,
             group: str | None = None) -> None:
        """Send a hand-off; ``group`` is the job's tenant.

        On a standard queue the message group makes it an SQS *fair queue*: when one tenant
        floods the queue, SQS delivers the other tenants' messages first, so a quiet
        tenant's jobs wait little. (It orders nothing; it is not a FIFO queue.)
        """
        # SQS delays are whole seconds. Rounded down, the message arrives up to a second
        # early and the worker waits for ``message.run_at`` (rounding up would make every
        # delayed job up to a second late instead).
        delay = _whole_seconds(delay_seconds)
        extra: dict[str, Any] = {"MessageGroupId": group[:128]} if group else {}
        self._sqs.send_message(
            QueueUrl=self.url(pool, priority), MessageBody=message.body(), DelaySeconds=delay,
            **extra)

    def send_batch(self, pool: str, priority: str,
                   entries: Sequence[tuple[Message, float, str | None]]) -> list[int]:
        """Send up to :data:`MAX_BATCH_ENTRIES` hand-offs to one queue in one request, each
        (message, delay, group) as :meth:`send` sends it; the indexes SQS refused."""
        batch = []
        for i, (message, delay_seconds, group) in enumerate(entries):
            entry: dict[str, Any] = {
                "Id": str(i), "MessageBody": message.body(),
                "DelaySeconds": _whole_seconds(delay_seconds)}
            if group:
                entry["MessageGroupId"] = group[:128]
            batch.append(entry)
        answer = self._sqs.send_message_batch(QueueUrl=self.url(pool, priority), Entries=batch)
        return sorted(int(failed["Id"]) for failed in answer.get("Failed", []))

    def send_dead(self, pool: str, priority: str, job_id: str, reason: str) -> None:
        """Copy a DEAD job to its DLQ so operators see it where they look for failures."""
        body = json.dumps({"job_id": job_id, "dead": True, "reason": reason[:1000]})
        self._sqs.send_message(QueueUrl=self.dlq_url(pool, priority), MessageBody=body)

    def receive(self, url: str, *, max_messages: int = 10, wait_seconds: int = 0,
                visibility_seconds: int | None = None) -> list[Received]:
        kwargs: dict[str, Any] = {
            "QueueUrl": url, "MaxNumberOfMessages": max_messages,
            "WaitTimeSeconds": wait_seconds,
            "MessageSystemAttributeNames": ["ApproximateReceiveCount", "SentTimestamp",
                                            "MessageGroupId"],
        }
        if visibility_seconds is not None:
            kwargs["VisibilityTimeout"] = visibility_seconds
        response = self._sqs.receive_message(**kwargs)
        return [
            Received(url, m["ReceiptHandle"], m["MessageId"], m["Body"],
                     int(m.get("Attributes", {}).get("ApproximateReceiveCount", 1)),
                     m.get("Attributes", {}).get("MessageGroupId"))
            for m in response.get("Messages", [])
        ]

    def delete(self, url: str, receipt_handles: Sequence[str]) -> None:
        for start in range(0, len(receipt_handles), 10):
            chunk = receipt_handles[start:start + 10]
            self._sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(chunk)],
            )

    def visible(self, pool: str, priority: str) -> int:
        """Messages waiting in one queue (approximate, as SQS counts them)."""
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self.url(pool, priority),
            AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
        return int(attributes.get("ApproximateNumberOfMessages", 0))

    def extend_all(self, url: str, receipt_handles: Sequence[str], seconds: int) -> None:
        """Set the visibility of several messages of one queue (10 per request)."""
        for start in range(0, len(receipt_handles), 10):
            chunk = receipt_handles[start:start + 10]
            self._sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
                {"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": min(seconds, 43_200)}
                for i, h in enumerate(chunk)])

    def extend(self, url: str, receipt_handle: str, seconds: int) -> None:
        self._sqs.change_message_visibility(
            QueueUrl=url, ReceiptHandle=receipt_handle, VisibilityTimeout=min(seconds, 43_200)
        )

    def url_from_arn(self, arn: str) -> str:
        """Lambda's SQS records name their queue by ARN: ``arn:aws:sqs:region:account:name``."""
        return self.url_by_name(arn.rsplit(":", 1)[-1])


def _whole_seconds(delay_seconds: float) -> int:
    """An SQS delay: whole seconds, rounded down (the worker waits out the rest)."""
    return max(0, min(MAX_DELAY_SECONDS, math.floor(delay_seconds)))
