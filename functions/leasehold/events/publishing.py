"""Job state events: every change the store makes is published, so others react without polling.

Each event has source ``leasehold.job`` and a detail-type per state (``Job Queued``,
``Job Succeeded``, ...). On AWS they go to the EventBridge bus named by ``event_bus``; in the
local runtime ``event_bus`` is ``file:<path>`` and they are appended to a JSON-lines log that
``leasehold events tail`` follows. Publishing never fails a transition: the store's observer
contract logs and swallows errors, and the job row stays the source of truth.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from leasehold.clock import iso
from leasehold.core.jobs import Job
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Observer

log = logging.getLogger(__name__)
SOURCE = "leasehold.job"
FILE_PREFIX = "file:"
#: The source of the line ``leasehold dev`` writes to its event log when it starts: what
#: comes before it is an earlier run's (``leasehold events tail`` shows it as such).
RUNTIME_SOURCE = "leasehold.dev"
#: Job attributes carried in ``detail`` (never the payload or result: they may be large or
#: private; a consumer that needs them reads the job).
_EXTRA = ("schedule_id", "scheduled_for", "workflow_id", "step_id", "trigger_id")


def detail_type(state: JobState) -> str:
    return f"Job {state.value.capitalize()}"


def job_event(job: Job, source: JobState | None, now: int) -> dict[str, Any]:
    """The event for ``job`` having just entered its state (from ``source``; None: created)."""
    detail: dict[str, Any] = {
        "job_id": job.job_id, "tenant": job.tenant, "task": job.task, "state": job.state.value,
        "previous_state": source.value if source is not None else None, "epoch": job.epoch,
        "attempt": job.attempt, "pool": job.pool, "priority": job.priority,
        "run_at": iso(job.run_at),
    }
    detail.update({k: job.extra[k] for k in _EXTRA if k in job.extra})
    if job.error is not None and job.state.terminal:
        detail["error"] = {"type": job.error.type, "message": job.error.message[:1000]}
    return {"source": SOURCE, "detail-type": detail_type(job.state), "time": iso(now),
            "detail": detail}


def runtime_started(now: int, pid: int) -> dict[str, Any]:
    """The event log's marker for a new run of ``leasehold dev``."""
    return {"source": RUNTIME_SOURCE, "detail-type": "Runtime Started", "time": iso(now),
            "detail": {"pid": pid}}


class Sink(Protocol):
    def publish(self, event: dict[str, Any]) -> None: ...


class EventBridgeSink:
    def __init__(self, client: Any, bus: str) -> None:
        self.client = client
        self.bus = bus

    def publish(self, event: dict[str, Any]) -> None:
        response = self.client.put_events(Entries=[{
            "Source": event["source"], "DetailType": event["detail-type"],
            "Detail": json.dumps(event["detail"], separators=(",", ":")),
            "EventBusName": self.bus,
        }])
        if response.get("FailedEntryCount"):
            log.warning("EventBridge refused an event: %s", response.get("Entries"))


class FileSink:
    """A JSON-lines log, one event per line; appends from many threads stay whole lines."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def publish(self, event: dict[str, Any]) -> None:
        line = json.dumps(event, separators=(",", ":"), sort_keys=True) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line)


def sink_for(app: Leasehold) -> Sink | None:
    bus = app.settings.event_bus
    if not bus:
        return None
    if bus.startswith(FILE_PREFIX):
        return FileSink(bus[len(FILE_PREFIX):])
    return EventBridgeSink(app.clients.client("events"), bus)


def observer(sink: Sink, app: Leasehold) -> Observer:
    def publish(job: Job, source: JobState | None) -> None:
        if source is job.state and job.state is not JobState.QUEUED:
            return  # not a state change (a re-drive is QUEUED -> QUEUED: still published)
        sink.publish(job_event(job, source, app.now()))

    return publish


def install(app: Leasehold, sink: Sink | None = None) -> Sink | None:
    """Publish every job state change of ``app`` (to ``sink``, or as its settings say)."""
    sink = sink or sink_for(app)
    if sink is not None:
        observers: list[Observer] = app.store.observers
        observers.append(observer(sink, app))
    return sink


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
