"""A remote lease's token: its owner (the fencing value every write is conditioned on) and
the message it came from, kept in flight until the job's outcome is written, as a Python
worker keeps it (so SQS fair queues count the job as its tenant's, in flight)."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from leasehold.errors import LeaseLost
from leasehold.lifecycle.app import Leasehold
from leasehold.settings import PRIORITIES


@dataclass(frozen=True)
class Token:
    owner: str
    queue_url: str
    receipt_handle: str

    def encode(self) -> str:
        data = json.dumps([self.owner, self.queue_url, self.receipt_handle],
                          separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str, job_id: str) -> Token:
        """The token; one that cannot be read is no lease (409 lease_lost)."""
        try:
            data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
            owner, url, handle = (str(part) for part in data)
        except (ValueError, TypeError, binascii.Error):
            raise LeaseLost(job_id=job_id) from None
        return cls(owner, url, handle)

    def queue_of(self, app: Leasehold, pool: str) -> str | None:
        """The message's queue if it is one of ``pool``'s (a forged URL is never used)."""
        urls = {app.queues.url(pool, priority) for priority in PRIORITIES}
        return self.queue_url if self.queue_url in urls else None


__all__ = ["Token"]
