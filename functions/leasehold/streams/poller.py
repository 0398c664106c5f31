"""The relay run locally: ``GetRecords`` over a ``dynamodbstreams`` endpoint (the embedded
emulator's, or DynamoDB Local's), from a checkpoint.

The checkpoint (the stream's ARN, and per shard the last sequence number relayed) is written
only after a batch's hand-offs and events went out, so a relay killed mid-batch reads that
batch again when it restarts: nothing is lost, and the repeats carry the same ``event_id``
(a repeated hand-off is fenced by the lease). A record that cannot be decoded is read again
:data:`TRIES` times, then set aside, whole, in a JSON-lines file beside the checkpoint
(:data:`SET_ASIDE`, logged), and the relay goes on after it, as the deployed mapping's
retries and on-failure destination do; a batch whose hand-offs or events did not go out is
read again until they do (the queue or the bus is down: its records are late, not lost).
A checkpoint of another stream (the embedded
emulator makes its tables, and so its stream, anew at every start) is ignored. On AWS the
same :func:`leasehold.streams.relay.relay` runs behind a Lambda event source mapping.

Idle, it costs one ``GetRecords`` per shard per pass, and passes back off to
:data:`IDLE_SECONDS` while they find nothing: iterators are kept from pass to pass, and the
stream is described again only every :data:`DESCRIBE_SECONDS` (new shards) or when an
iterator is gone.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from functools import partial
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from leasehold.clock import iso
from leasehold.events.publishing import Sink, published
from leasehold.lifecycle.app import Leasehold
from leasehold.streams.images import Undecodable, job_of, sequence_number
from leasehold.streams.relay import relay
from leasehold.streams.removals import after_commit

log = logging.getLogger(__name__)

#: The longest wait between two passes that found nothing, and the first one. Idle, a pass
#: is one GetRecords per shard: 5 s makes it 0.2 requests/s (3 s made it a sixth of an idle
#: `leasehold dev`'s requests; issue 32). The wait doubles from 0.1 s, so a change written
#: after a quiet spell goes out within 5 s, and one written while busy within 0.1 s.
IDLE_SECONDS, BUSY_SECONDS = 5.0, 0.1
#: How often the stream's shards are listed again.
DESCRIBE_SECONDS = 60.0
#: Reads of a record that cannot be decoded before it is set aside.
TRIES = 3
#: The file (beside the checkpoint) that keeps the records set aside, one JSON line each.
SET_ASIDE = "relay-dead.jsonl"


class Checkpoint:
    """The stream relayed and, per shard, the last sequence number relayed, in a JSON file
    replaced atomically."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def load(self, stream: str | None = None) -> dict[str, str]:
        """The positions saved for ``stream`` (any stream, if None); {} for another one."""
        if not self.path.exists():
            return {}
        saved = json.loads(self.path.read_text(encoding="utf-8"))
        if stream is not None and saved.get("stream") not in (None, stream):
            return {}
        return dict(saved.get("shards", {}))

    def save(self, positions: dict[str, str], stream: str | None = None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"stream": stream, "shards": positions},
                                        sort_keys=True), encoding="utf-8")
        os.replace(temporary, self.path)


def stream_arn(app: Leasehold) -> str:
    table = app.clients.dynamodb.describe_table(TableName=app.settings.jobs_table)["Table"]
    return str(table["LatestStreamArn"])


class StreamReader:
    """One relay's position in the jobs table's stream: its shards' iterators, kept."""

    def __init__(self, app: Leasehold, sink: Sink, checkpoint: Checkpoint, *,
                 client: Any | None = None, start: str = "TRIM_HORIZON",
                 limit: int = 100, dead: Path | None = None) -> None:
        self.app, self.sink, self.checkpoint, self.limit = app, sink, checkpoint, limit
        #: Where records that cannot be decoded are set aside.
        self.dead = dead or checkpoint.path.with_name(SET_ASIDE)
        self.client = client or app.clients.client("dynamodbstreams")
        self.start = start
        self.arn = stream_arn(app)
        self.positions = checkpoint.load(self.arn)
        self.iterators: dict[str, str] = {}
        self.described = 0.0
        #: Per shard, the undecodable record it stopped at and how often it was read.
        self.tries: dict[str, tuple[str, int]] = {}

    def open(self) -> None:
        """List the stream's shards and take an iterator for each new one."""
        shards = self.client.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id in self.iterators:
                continue
            self.iterators[shard_id] = self._iterator(shard_id)
        self.described = time.monotonic()

    def _iterator(self, shard_id: str) -> str:
        start: dict[str, Any] = (
            {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER",
             "SequenceNumber": self.positions[shard_id]}
            if shard_id in self.positions else {"ShardIteratorType": self.start})
        return str(self.client.get_shard_iterator(StreamArn=self.arn, ShardId=shard_id,
                                                  **start)["ShardIterator"])

    def step(self) -> int:
        """Relay what each shard has now; how many records. A batch whose hand-offs or
        events did not all go out stops its shard, unsaved: it is read again."""
        if not self.iterators or time.monotonic() - self.described > DESCRIBE_SECONDS:
            self.open()
        relayed = 0
        for shard_id in list(self.iterators):
            while True:
                try:
                    response = self.client.get_records(ShardIterator=self.iterators[shard_id],
                                                       Limit=self.limit)
                except ClientError as exc:
                    if exc.response["Error"]["Code"] not in ("ExpiredIteratorException",
                                                             "TrimmedDataAccessException"):
                        raise
                    self.iterators[shard_id] = self._iterator(shard_id)
                    break
                records = response.get("Records", [])
                failed = records and relay(records, self.sink,
                                           published(self.app.settings.publish, self.sink),
                                           self.app.now, hand_off=partial(after_commit, self.app))
                if failed:
                    done, set_aside = self._done(shard_id, records, failed[0])
                    if done:
                        self._save(shard_id, records[done - 1])
                        relayed += done
                    self.iterators[shard_id] = self._iterator(shard_id)
                    if set_aside:
                        continue  # go on after it at once
                    log.warning("relay: %d record(s) of shard %s to read again",
                                len(records) - done, shard_id)
                    break
                following = response.get("NextShardIterator")
                if records:
                    self._save(shard_id, records[-1])
                    relayed += len(records)
                if following is None:  # a closed shard, read to its end
                    del self.iterators[shard_id]
                    break
                self.iterators[shard_id] = following
                if not records:
                    break
        return relayed

    def _done(self, shard_id: str, records: list[dict[str, Any]], failed: str
              ) -> tuple[int, bool]:
        """How many of ``records`` are done once the relay failed from record ``failed``:
        those before it, and that one too once it cannot be decoded and was read
        :data:`TRIES` times (then it is set aside: the second value says so)."""
        index = next((i for i, record in enumerate(records)
                      if sequence_number(record) == failed), 0)
        record = records[index]
        try:
            job_of(record)
            job_of(record, "OldImage")
        except Undecodable as exc:
            seen, count = self.tries.get(shard_id, ("", 0))
            count = count + 1 if seen == failed else 1
            if count < TRIES:
                self.tries[shard_id] = (failed, count)
                return index, False
            self.tries.pop(shard_id, None)
            self._set_aside(shard_id, record, exc)
            return index + 1, True
        return index, False  # its hand-off or its events did not go out: read it again

    def _set_aside(self, shard_id: str, record: dict[str, Any], error: Exception) -> None:
        self.dead.parent.mkdir(parents=True, exist_ok=True)
        line = {"set_aside_at": iso(self.app.now()), "stream": self.arn, "shard": shard_id,
                "sequence_number": sequence_number(record), "error": str(error),
                "tries": TRIES, "record": record}
        with self.dead.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line, default=str, sort_keys=True) + "\n")
        log.error("relay: stream record %s of shard %s cannot be decoded after %d reads; "
                  "set aside in %s, and the relay goes on after it (%s)",
                  sequence_number(record), shard_id, TRIES, self.dead, error)

    def _save(self, shard_id: str, record: dict[str, Any]) -> None:
        self.positions[shard_id] = sequence_number(record)
        self.checkpoint.save(self.positions, self.arn)


def poll(app: Leasehold, sink: Sink, checkpoint: Checkpoint, *, client: Any | None = None,
         limit: int = 100) -> int:
    """One pass over every shard from the checkpoint (from the stream's start without one);
    how many records were relayed."""
    return StreamReader(app, sink, checkpoint, client=client, limit=limit).step()


def run(app: Leasehold, sink: Sink, checkpoint: Checkpoint, stop: threading.Event, *,
        start: str = "TRIM_HORIZON", ready: threading.Event | None = None) -> None:
    """Relay until ``stop`` is set (``leasehold dev``'s relay thread). ``start``: where a
    shard with no checkpoint begins (``LATEST``: only what changes from now on); ``ready``
    is set once every shard has its iterator, so nothing written afterwards is missed."""
    reader: StreamReader | None = None
    wait = BUSY_SECONDS
    while not stop.is_set():
        try:
            if reader is None:
                reader = StreamReader(app, sink, checkpoint, start=start)
                reader.open()
                if ready is not None:
                    ready.set()
                # A reader made again after a failure starts a shard it never checkpointed
                # from the stream's start: repeats (same event ids, fenced hand-offs)
                # rather than a gap.
                start = "TRIM_HORIZON"
            wait = BUSY_SECONDS if reader.step() else min(IDLE_SECONDS, wait * 2)
        except Exception:
            log.exception("relay pass failed; the checkpoint holds, the next pass reads again")
            reader, wait = None, IDLE_SECONDS
        stop.wait(wait)
    if reader is not None:  # a last pass: what was written before the stop goes out
        try:
            reader.step()
        except Exception:
            log.exception("the relay's last pass failed; its checkpoint holds")
