"""Job state events: every change the store makes is published, so others react without polling.

Each event has source ``leasehold.job`` and a detail-type per state (``Job Queued``,
``Job Succeeded``, ...). On AWS they go to the EventBridge bus named by ``event_bus``; in the
local runtime ``event_bus`` is ``file:<path>`` and they are appended to a JSON-lines log that
``leasehold events tail`` follows. Publishing never fails a transition: the store's observer
contract logs and swallows errors, and the job row stays the source of truth.

Which changes are published is the ``publish`` setting (``LEASEHOLD_PUBLISH``): ``all``,
``terminal`` (the default: SUCCEEDED, DEAD, CANCELLED) or ``none``. Within a batch (a worker's
batch of records, a ticker or sweeper pass) events are sent together when it ends, in
PutEvents requests of up to 10 entries; refused entries are retried a few times, then logged
and counted. Delivery is at least once (a retried call whose first try landed publishes
twice, a relay reads a batch again): a consumer that must not act twice keys on
``detail.event_id`` (:func:`event_id`), one per committed change of the row.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from leasehold.clock import iso
from leasehold.core.jobs import CODE_VERSION, Job
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.deferral import Deferred
from leasehold.lifecycle.store import CHANGES, Observer

log = logging.getLogger(__name__)
SOURCE = "leasehold.job"
FILE_PREFIX = "file:"
#: The source of the line ``leasehold dev`` writes to its event log when it starts: what
#: comes before it is an earlier run's (``leasehold events tail`` shows it as such).
RUNTIME_SOURCE = "leasehold.dev"
#: Job attributes carried in ``detail`` (never the payload or result: they may be large or
#: private; a consumer that needs them reads the job).
_EXTRA = ("schedule_id", "scheduled_for", "workflow_id", "step_id", "trigger_id",
          CODE_VERSION)


def detail_type(state: JobState) -> str:
    return f"Job {state.value.capitalize()}"


def event_id(job: Job) -> str:
    """The id of the event for the change that left the row as ``job``: one per committed
    change (the row's change counter, :data:`~leasehold.lifecycle.store.CHANGES`, which every
    state change increments in its own write), and one per row created under this id (its
    creation time: a job id used again after its row was deleted starts counting anew). The
    same for the process that made the change and the stream relay that reads it, however
    often either publishes it. A row written before the counter existed keeps the old id,
    ``{job_id}:{epoch}:{state}`` (its changes are told apart by the state name at the end)."""
    changes = job.extra.get(CHANGES)
    if changes is None:
        return f"{job.job_id}:{job.epoch}:{job.state.value}"
    return f"{job.job_id}:{job.created_at}:{int(changes)}"


def job_event(job: Job, source: JobState | None, now: int) -> dict[str, Any]:
    """The event for ``job`` having just entered its state (from ``source``; None: created)."""
    detail: dict[str, Any] = {
        "event_id": event_id(job), "job_id": job.job_id, "tenant": job.tenant,
        "task": job.task, "state": job.state.value,
        "previous_state": source.value if source is not None else None, "epoch": job.epoch,
        "attempt": job.attempt, "pool": job.pool, "priority": job.priority,
        "run_at": iso(job.run_at),
    }
    detail.update({k: job.extra[k] for k in _EXTRA if k in job.extra})
    # The code version of the job's latest attempt (its lease's history entry; issue 36).
    latest = next((t.version for t in reversed(job.history) if t.version), None)
    if latest is not None:
        detail["attempt_code_version"] = latest
    if job.error is not None and job.state.terminal:
        detail["error"] = {"type": job.error.type, "message": job.error.message[:1000]}
    return {"source": SOURCE, "detail-type": detail_type(job.state), "time": iso(now),
            "detail": detail}


def runtime_started(now: int, pid: int) -> dict[str, Any]:
    """The event log's marker for a new run of ``leasehold dev``."""
    return {"source": RUNTIME_SOURCE, "detail-type": "Runtime Started", "time": iso(now),
            "detail": {"pid": pid}}


def published(publish: str, sink: Sink) -> str:
    """What ``sink`` is sent under the setting ``publish``. ``off`` saves EventBridge's
    $1.00 per million events; a local event log costs nothing, so under ``off`` it still gets
    every change and ``leasehold events tail`` works whatever the setting."""
    if publish in ("off", "none") and isinstance(sink, FileSink):
        return "all"
    return publish


def wanted(publish: str, job: Job, source: JobState | None) -> bool:
    """Whether the change of ``job`` from ``source`` is published under ``publish``
    (``terminal``, ``all`` or ``off``: :data:`leasehold.settings.PUBLISH_CHOICES`)."""
    if source is job.state and job.state is not JobState.QUEUED:
        return False  # not a state change (a re-drive is QUEUED -> QUEUED: still published)
    if publish == "all":
        return True
    return publish == "terminal" and job.state.terminal


#: PutEvents takes at most 10 entries, and 256 KB of entries, per request.
MAX_ENTRIES = 10
MAX_REQUEST_BYTES = 256 * 1024
#: Tries for the entries of one request that PutEvents refused (FailedEntryCount, or the
#: whole call failing once botocore's own retries ran out) before they are given up on.
PUT_TRIES = 3
#: Seconds before the first retry of refused entries; doubled for each later one.
RETRY_SECONDS = 0.2


def entry_size(entry: dict[str, Any]) -> int:
    """An entry's size as EventBridge counts it against the 256 KB of a request (Time counts
    14 bytes; Source, DetailType and Detail their UTF-8 bytes)."""
    return 14 + sum(len(str(entry.get(key, "")).encode()) for key in
                    ("Source", "DetailType", "Detail"))


def requests(entries: Sequence[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """``entries`` in order, cut into PutEvents requests of at most 10 entries and 256 KB."""
    chunk: list[dict[str, Any]] = []
    size = 0
    for entry in entries:
        this = entry_size(entry)
        if chunk and (len(chunk) == MAX_ENTRIES or size + this > MAX_REQUEST_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(entry)
        size += this
    if chunk:
        yield chunk


class Sink(Protocol):
    def publish_all(self, events: Sequence[dict[str, Any]]) -> int:
        """Publish ``events`` in order; returns how many could not be published."""
        ...


class EventBridgeSink:
    def __init__(self, client: Any, bus: str,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.client = client
        self.bus = bus
        self.sleep = sleep

    def entry(self, event: dict[str, Any]) -> dict[str, Any]:
        return {"Source": event["source"], "DetailType": event["detail-type"],
                "Detail": json.dumps(event["detail"], separators=(",", ":")),
                "EventBusName": self.bus}

    def publish_all(self, events: Sequence[dict[str, Any]]) -> int:
        return sum(self._put(chunk) for chunk in requests([self.entry(e) for e in events]))

    def _put(self, entries: list[dict[str, Any]]) -> int:
        """One request's entries, the refused ones retried; returns how many were given up."""
        pending = entries
        for attempt in range(PUT_TRIES):
            if attempt:
                self.sleep(RETRY_SECONDS * 2 ** (attempt - 1))
            try:
                # Copies: a request's parameters are its own (botocore hooks may rewrite them).
                response = self.client.put_events(Entries=[dict(e) for e in pending])
            except Exception:  # throttled or failed past botocore's retries: all of them again
                log.warning("PutEvents failed (%d entries, try %d of %d)", len(pending),
                            attempt + 1, PUT_TRIES, exc_info=True)
                continue
            if not response.get("FailedEntryCount"):
                return 0
            results = response.get("Entries", [])
            log.warning("PutEvents refused %d of %d entries (try %d of %d): %s",
                        response["FailedEntryCount"], len(pending), attempt + 1, PUT_TRIES,
                        sorted({r.get("ErrorCode") for r in results if r.get("ErrorCode")}))
            # Results are in the order of the entries: only the refused ones go again.
            pending = [e for e, r in zip(pending, results, strict=False) if r.get("ErrorCode")]
            if not pending:
                return 0
        return len(pending)


class FileSink:
    """A JSON-lines log, one event per line; appends from many threads stay whole lines."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def publish(self, event: dict[str, Any]) -> None:
        self.publish_all([event])

    def publish_all(self, events: Sequence[dict[str, Any]]) -> int:
        lines = "".join(json.dumps(event, separators=(",", ":"), sort_keys=True) + "\n"
                        for event in events)
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(lines)
        return 0


def sink_for(app: Leasehold) -> Sink | None:
    bus = app.settings.event_bus
    if not bus:
        return None
    if bus.startswith(FILE_PREFIX):
        return FileSink(bus[len(FILE_PREFIX):])
    return EventBridgeSink(app.clients.client("events"), bus, sleep=app.clock.sleep)


class Publisher:
    """The store observer that publishes: at once, or at the end of the batch it is in.

    Within :meth:`batch` (a worker's batch of records, a ticker or sweeper pass: see
    ``Leasehold.batch``) the events of this thread are kept and sent when the batch ends, in
    PutEvents requests of up to 10 entries, before the batch's records are reported done.
    Outside a batch (one submission through the API, a heartbeat's thread) an event is sent
    at once. An event that cannot be published is logged and counted (``unpublished``, and
    ``on_unpublished``: the Lambda handlers' metric); it never fails or re-runs a job.
    """

    def __init__(self, sink: Sink, publish: str, now: Callable[[], int]) -> None:
        self.sink = sink
        self.publish = publish
        self.now = now
        self.unpublished = 0
        self.on_unpublished: Callable[[int], None] | None = None
        self._kept: Deferred[dict[str, Any]] = Deferred(self._send)
        #: Keep this thread's events until the outermost batch ends, then send them.
        self.batch = self._kept.batch
        self._lock = threading.Lock()

    def __call__(self, job: Job, source: JobState | None) -> None:
        if not wanted(self.publish, job, source):
            return
        event = job_event(job, source, self.now())
        if not self._kept.add(event):
            self._send([event])

    def _send(self, events: list[dict[str, Any]]) -> None:
        if not events:
            return
        try:
            lost = self.sink.publish_all(events)
        except Exception:
            log.exception("could not publish %d job state event(s)", len(events))
            lost = len(events)
        if lost:
            log.error("%d job state event(s) not published; the jobs are unaffected (their "
                      "rows are the source of truth)", lost,
                      extra={"unpublished_events": lost})
            with self._lock:
                self.unpublished += lost
            if self.on_unpublished is not None:
                self.on_unpublished(lost)


def install(app: Leasehold, sink: Sink | None = None) -> Publisher | None:
    """Publish the job state changes of ``app`` that its ``publish`` setting names (to
    ``sink``, or where its settings say), batched within ``app.batch()``."""
    sink = sink or sink_for(app)
    if sink is None:
        return None
    publish = published(app.settings.publish, sink)
    if publish in ("off", "none"):
        return None  # no observer: a finished job makes no EventBridge request
    publisher = Publisher(sink, publish, app.now)
    observers: list[Observer] = app.store.observers
    observers.append(publisher)
    app.batches.append(publisher.batch)
    return publisher


def tail(path: str | Path, *, follow: bool = False, poll_seconds: float = 0.2,
         stop: threading.Event | None = None, start: int = 0) -> Iterator[dict[str, Any]]:
    """Events in a local event log from byte ``start``, oldest first; with ``follow``, wait
    for new ones."""
    path = Path(path)
    position = start
    partial = ""
    while True:
        if path.exists():
            with path.open(encoding="utf-8") as log_file:
                log_file.seek(position)
                chunk = log_file.read()
                position = log_file.tell()
            partial += chunk
            *lines, partial = partial.split("\n")
            for line in lines:
                if line.strip():
                    yield json.loads(line)
        if not follow or (stop is not None and stop.is_set()):
            return
        time.sleep(poll_seconds)
