"""Leader leases in the coordination table, for loops that run for a long time.

A lease is one item (``pk="leader"``, ``sk=name``) holding its owner and expiry. Acquiring
or renewing is one conditional put that succeeds if nobody holds it, we hold it, or the
holder let it expire; so a standby takes over within one lease period of the leader's death.
Expiry is compared in the condition (never left to DynamoDB TTL, which deletes within
days); the TTL attribute only cleans up leases nobody renews.
"""

from __future__ import annotations

import socket
import uuid
from typing import Any

from botocore.exceptions import ClientError

from leasehold.aws.dynamo import condition_failed
from leasehold.lifecycle.app import Leasehold


class LeaderLease:
    def __init__(self, app: Leasehold, name: str, *, owner: str | None = None,
                 lease_seconds: float = 10.0) -> None:
        self.app = app
        self.name = name
        self.owner = owner or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
        self.lease_ms = int(lease_seconds * 1000)
        self.expires_at: int | None = None

    @property
    def _ddb(self) -> Any:
        return self.app.clients.dynamodb

    def _key(self) -> dict[str, Any]:
        return {"pk": {"S": "leader"}, "sk": {"S": self.name}}

    def acquire(self) -> bool:
        """Take or renew the lease; True while we hold it."""
        now = self.app.now()
        expires = now + self.lease_ms
        try:
            self._ddb.put_item(
                TableName=self.app.settings.coordination_table,
                Item={**self._key(), "owner": {"S": self.owner},
                      "expires_at": {"N": str(expires)},
                      "expires_at_s": {"N": str(expires // 1000 + 86_400)}},
                ConditionExpression=(
                    "attribute_not_exists(pk) OR #owner = :me OR expires_at < :now"),
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":me": {"S": self.owner}, ":now": {"N": str(now)}},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
            self.expires_at = None
            return False
        self.expires_at = expires
        return True

    def holder(self) -> str | None:
        item = self._ddb.get_item(TableName=self.app.settings.coordination_table,
                                  Key=self._key(), ConsistentRead=True).get("Item")
        if not item or int(item["expires_at"]["N"]) < self.app.now():
            return None
        return str(item["owner"]["S"])

    def release(self) -> None:
        """Give the lease up at once (a clean shutdown), so a standby need not wait."""
        try:
            self._ddb.delete_item(
                TableName=self.app.settings.coordination_table, Key=self._key(),
                ConditionExpression="#owner = :me",
                ExpressionAttributeNames={"#owner": "owner"},
                ExpressionAttributeValues={":me": {"S": self.owner}},
            )
        except ClientError as exc:
            if not condition_failed(exc):
                raise
        self.expires_at = None
