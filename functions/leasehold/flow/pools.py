"""Pausing and resuming a pool: paused work stays queued, nothing is lost.

The flag is one item of the tenants table, ``#pool#{name}`` (no tenant starts with ``#``). A
polling worker (local, ECS) reads it at most every :data:`RECHECK_SECONDS` and receives
nothing from a paused pool's queues. On AWS a Lambda pool has no poller of ours: pausing it
disables its SQS event source mappings (the API function is granted
``lambda:UpdateEventSourceMapping`` on them only), so a paused pool costs nothing; resuming
enables them again. Messages wait in their queues meanwhile (retention 7 days; the sweeper's
re-sends of a job whose hand-off is overdue wait with them).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from leasehold.aws.dynamo import to_av
from leasehold.lifecycle.app import Leasehold
from leasehold.settings import Settings

#: How stale a polling worker's view of its pool's pause may be (one read per this, per
#: worker, is what pausing costs a running worker).
RECHECK_SECONDS = 5.0


def item_key(pool: str) -> dict[str, Any]:
    return {"tenant": {"S": f"#pool#{pool}"}}


def mappings(settings: Settings, pool: str) -> list[str]:
    """The event source mapping ids of a Lambda pool (none locally or for an ECS pool)."""
    for part in settings.event_source_mappings.split(","):
        name, _, ids = part.partition("=")
        if name.strip() == pool:
            return [i for i in ids.split(";") if i]
    return []


def set_paused(app: Leasehold, pool: str, paused: bool) -> bool:
    """Pause or resume ``pool``: the flag first (pollers see it), then the mappings."""
    expression = "SET paused = :yes" if paused else "REMOVE paused"
    kwargs: dict[str, Any] = {"TableName": app.settings.tenants_table, "Key": item_key(pool),
                              "UpdateExpression": expression}
    if paused:
        kwargs["ExpressionAttributeValues"] = to_av({":yes": True})
    app.clients.dynamodb.update_item(**kwargs)
    ids = mappings(app.settings, pool)
    if ids:
        client = app.clients.client("lambda")
        for uuid in ids:
            client.update_event_source_mapping(UUID=uuid, Enabled=not paused)
    return paused


def is_paused(app: Leasehold, pool: str) -> bool:
    response = app.clients.dynamodb.get_item(TableName=app.settings.tenants_table,
                                             Key=item_key(pool), ConsistentRead=True)
    return bool(response.get("Item", {}).get("paused"))


class PauseView:
    """A polling worker's view of its pool's pause, read at most every RECHECK_SECONDS."""

    def __init__(self, app: Leasehold, pool: str) -> None:
        self.app, self.pool = app, pool
        self._paused = False
        self._read_at = -RECHECK_SECONDS

    def paused(self) -> bool:
        now = time.monotonic()
        if now - self._read_at >= RECHECK_SECONDS:
            self._read_at = now
            # Unreadable: keep the last view, never stop (or start) on a blip.
            with contextlib.suppress(Exception):
                self._paused = is_paused(self.app, self.pool)
        return self._paused
