"""The relay run locally: ``GetRecords`` over the emulator's ``dynamodbstreams``, from a
checkpoint kept with the local state.

The checkpoint (shard id -> last sequence number relayed) is written only after a batch's
events were published, so a relay killed mid-batch reads that batch again when it restarts:
nothing is lost, and the repeats carry the same ``event_id``. On AWS the same
:func:`leasehold.streams.relay.relay` runs behind a Lambda event source mapping instead.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from functools import partial
from pathlib import Path
from typing import Any

from leasehold.events.publishing import Sink
from leasehold.lifecycle.app import Leasehold
from leasehold.streams.enqueue import hand_off
from leasehold.streams.relay import relay

log = logging.getLogger(__name__)


class Checkpoint:
    """Shard id -> the last sequence number relayed, persisted atomically in a JSON file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, str]:
        if not self.path.exists():
            return {}
        return dict(json.loads(self.path.read_text(encoding="utf-8")))

    def save(self, positions: dict[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps(positions, sort_keys=True), encoding="utf-8")
        os.replace(temporary, self.path)


def stream_arn(app: Leasehold) -> str:
    table = app.clients.dynamodb.describe_table(TableName=app.settings.jobs_table)["Table"]
    return str(table["LatestStreamArn"])


def poll(app: Leasehold, sink: Sink, checkpoint: Checkpoint, *, client: Any | None = None,
         limit: int = 100) -> int:
    """Relay every record after the checkpoint, shard by shard; returns how many records were
    relayed. A batch whose events were not all published stops its shard, unsaved."""
    client = client or app.clients.client("dynamodbstreams")
    arn = stream_arn(app)
    positions = checkpoint.load()
    relayed = 0
    shards = client.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    for shard in shards:
        shard_id = shard["ShardId"]
        start: dict[str, Any] = (
            {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": positions[shard_id]}
            if shard_id in positions else {"ShardIteratorType": "TRIM_HORIZON"})
        iterator = client.get_shard_iterator(StreamArn=arn, ShardId=shard_id,
                                             **start)["ShardIterator"]
        while iterator:
            response = client.get_records(ShardIterator=iterator, Limit=limit)
            records = response.get("Records", [])
            if not records:
                break
            if relay(records, sink, app.settings.publish, app.now,
                     hand_off=partial(hand_off, app)):
                log.warning("relay: %d record(s) of shard %s to read again", len(records),
                            shard_id)
                break
            positions[shard_id] = str(records[-1]["dynamodb"]["SequenceNumber"])
            checkpoint.save(positions)
            relayed += len(records)
            iterator = response.get("NextShardIterator")
    return relayed


def run(app: Leasehold, sink: Sink, checkpoint: Checkpoint, stop: threading.Event, *,
        interval_seconds: float = 0.5) -> None:
    """Relay until ``stop`` is set (``leasehold dev``'s relay thread)."""
    while not stop.is_set():
        try:
            poll(app, sink, checkpoint)
        except Exception:
            log.exception("relay pass failed; the checkpoint holds, the next pass reads again")
        stop.wait(interval_seconds)
