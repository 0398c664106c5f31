"""``events="off"`` (``LEASEHOLD_PUBLISH=off``): a finished job makes no EventBridge request,
inline or from the change stream, while a local event log still gets every change, so
``leasehold events tail`` works whatever the setting (issue 32: events cost only when
someone listens; EventBridge bills $1.00 per million events)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from leasehold.aws.counting import RequestCounter
from leasehold.core.registry import TaskRegistry
from leasehold.events.publishing import FileSink, Publisher, sink_for, tail
from leasehold.lifecycle.app import Leasehold
from leasehold.streams.poller import Checkpoint, poll
from tests.conftest import MakeApp
from tests.integration.helpers import deliver
from tests.integration.test_event_batching import _app, _submit


@pytest.fixture
def stream_app(endpoint: str, monkeypatch: pytest.MonkeyPatch, make_app: MakeApp,
               registry: TaskRegistry) -> Any:
    for service in ("DYNAMODB", "DYNAMODB_STREAMS", "DYNAMODBSTREAMS"):
        monkeypatch.setenv(f"AWS_ENDPOINT_URL_{service}", endpoint)
    return lambda **overrides: _app(make_app, registry, events_from="stream", **overrides)


def test_with_events_off_a_finished_job_makes_no_eventbridge_request(
        make_app: MakeApp, registry: TaskRegistry) -> None:
    app: Leasehold = _app(make_app, registry, publish="off")
    counter = RequestCounter().attach(app.clients)
    _submit(app, 3)
    assert deliver(app) == 3
    assert counter.snapshot().total("events") == 0
    assert not any(isinstance(o, Publisher) for o in app.store.observers)


def test_with_events_off_the_change_stream_relay_makes_no_eventbridge_request(
        stream_app: Any, tmp_path: Path) -> None:
    app: Leasehold = stream_app(publish="off")
    counter = RequestCounter().attach(app.clients)
    _submit(app, 3)
    deliver(app)
    relayed = poll(app, sink_for(app), Checkpoint(tmp_path / "relay.json"))  # type: ignore[arg-type]
    assert relayed > 0  # the relay read the jobs' changes, and published none of them
    assert counter.snapshot().total("events") == 0


def test_a_local_event_log_gets_every_change_from_the_stream_with_events_off(
        stream_app: Any, tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    app: Leasehold = stream_app(publish="off", event_bus=f"file:{log}")
    [job] = _submit(app, 1)
    deliver(app)
    poll(app, FileSink(log), Checkpoint(tmp_path / "relay.json"))
    kinds = [e["detail-type"] for e in tail(log) if e["detail"]["job_id"] == job]
    assert kinds == ["Job Queued", "Job Running", "Job Succeeded"], kinds
