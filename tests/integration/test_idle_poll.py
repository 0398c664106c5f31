"""An idle polling worker long-polls every queue at once, against a real moto server.

The emulator runs moto's server in a child process, so SQS's ``WaitTimeSeconds`` really waits
(and really returns when a message arrives). A job on any priority queue must still start
within a second on an idle worker, and stopping must not wait for a long poll.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold.aws.clients import Clients
from leasehold.aws.provision import create_all
from leasehold.aws.queues import Received
from leasehold.compose import compose
from leasehold.lifecycle.app import Leasehold
from leasehold.polling import poller
from leasehold.polling.poller import PollerOptions, PollingWorker
from leasehold.settings import PRIORITIES, Settings


@pytest.fixture
def app(endpoint: str) -> Leasehold:
    prefix = "i" + uuid.uuid4().hex[:8]
    settings = Settings(
        endpoint_url=endpoint, jobs_table=f"{prefix}-jobs",
        schedules_table=f"{prefix}-schedules", tenants_table=f"{prefix}-tenants",
        coordination_table=f"{prefix}-coord", workflows_table=f"{prefix}-workflows",
        queue_prefix=prefix, shards=2, lease_seconds=30.0, pools=("default",))
    clients = Clients(settings)
    create_all(clients, settings)
    return compose(settings, clients=clients)


class Recorder:
    def __init__(self) -> None:
        self.batches: list[tuple[float, list[str]]] = []
        self.arrived = threading.Event()

    def __call__(self, _worker: Any, batch: list[Received]) -> None:
        self.batches.append((time.monotonic(), [m.body for m in batch]))
        self.arrived.set()


@pytest.fixture
def running(app: Leasehold, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[tuple[PollingWorker, Recorder]]:
    recorder = Recorder()
    monkeypatch.setattr(poller, "consume", recorder)  # the runner, not the store
    worker = PollingWorker(app, PollerOptions(wait_seconds=20, heartbeat_seconds=0.5),
                           worker=_Named())
    thread = threading.Thread(target=worker.run, kwargs={"drain_seconds": 2}, daemon=True)
    thread.start()
    try:
        yield worker, recorder
    finally:
        worker.stop()
        thread.join(10)
        assert not thread.is_alive()


class _Named:
    worker_id = "w-idle-test"
    running: frozenset[str] = frozenset()  # the jobs it runs now: none


def _wait_listening(worker: PollingWorker) -> None:
    deadline = time.monotonic() + 10
    while len(worker._listening) < len(PRIORITIES):
        assert time.monotonic() < deadline, "the worker never went idle"
        time.sleep(0.05)
    time.sleep(0.3)  # the long polls are at the emulator by now


@pytest.mark.parametrize("priority", PRIORITIES)
def test_a_message_on_any_queue_reaches_an_idle_worker_within_a_second(
        app: Leasehold, running: tuple[PollingWorker, Recorder], priority: str) -> None:
    worker, recorder = running
    _wait_listening(worker)
    sent = time.monotonic()
    app.clients.sqs.send_message(QueueUrl=app.queues.url("default", priority),
                                 MessageBody=f'{{"job_id":"{priority}","epoch":1}}')
    assert recorder.arrived.wait(5), "the idle worker never received the message"
    started, bodies = recorder.batches[0]
    assert bodies == [f'{{"job_id":"{priority}","epoch":1}}']
    assert started - sent < 1.0


def test_an_idle_worker_makes_one_receive_per_queue_per_wait(
        app: Leasehold, running: tuple[PollingWorker, Recorder],
        monkeypatch: pytest.MonkeyPatch) -> None:
    worker, _ = running
    _wait_listening(worker)
    calls: list[int] = []
    receive = app.queues.receive
    monkeypatch.setattr(app.queues, "receive",
                        lambda *a, **k: calls.append(k.get("wait_seconds", 0)) or receive(*a, **k))
    time.sleep(2)
    assert calls == []  # the three long polls started before are still waiting


def test_stop_does_not_wait_for_a_long_poll(app: Leasehold,
                                            running: tuple[PollingWorker, Recorder]) -> None:
    worker, recorder = running
    _wait_listening(worker)
    began = time.monotonic()
    worker.stop()
    while any(t.name == "poll" for t in threading.enumerate()):
        assert time.monotonic() - began < 2, "the poll loop waited for its long poll"
        time.sleep(0.05)
    # A message that arrives now is received by the orphaned long poll and given back at
    # once, not kept invisible for a visibility timeout.
    url = app.queues.url("default", "normal")
    app.clients.sqs.send_message(QueueUrl=url, MessageBody='{"job_id":"late","epoch":1}')
    deadline = time.monotonic() + 5
    found: list[dict[str, Any]] = []
    while not found and time.monotonic() < deadline:
        found = app.clients.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get(
            "Messages", [])
    assert [m["Body"] for m in found] == ['{"job_id":"late","epoch":1}']
    assert recorder.batches == []


def test_a_delayed_message_reaches_an_idle_worker_when_it_falls_due(
        app: Leasehold, running: tuple[PollingWorker, Recorder]) -> None:
    # moto wakes a waiting receive when a message is sent, not when a delay runs out; the
    # emulator makes it wake then too (SQS returns a message when it is due).
    worker, recorder = running
    _wait_listening(worker)
    sent = time.monotonic()
    app.clients.sqs.send_message(QueueUrl=app.queues.url("default", "low"),
                                 MessageBody='{"job_id":"later","epoch":1}', DelaySeconds=2)
    assert recorder.arrived.wait(8), "the idle worker never received the delayed message"
    started, _ = recorder.batches[0]
    assert 2.0 <= started - sent < 2.4


def test_what_a_dead_pollers_long_poll_receives_is_hidden_for_seconds_only(
        app: Leasehold) -> None:
    # A process killed while its long poll waits: the emulator (like SQS) still hands that
    # poll the next message. Nobody takes it from the poll, as nobody is left.
    orphan = PollingWorker(app, PollerOptions(wait_seconds=20), worker=_Named())
    poll = orphan._long_poll("normal")
    time.sleep(0.3)
    url = app.queues.url("default", "normal")
    app.clients.sqs.send_message(QueueUrl=url, MessageBody='{"job_id":"orphaned","epoch":1}')
    assert [m.body for m in poll.result(timeout=5)] == ['{"job_id":"orphaned","epoch":1}']
    shown = time.monotonic()
    found: list[dict[str, Any]] = []
    while not found:
        assert time.monotonic() - shown < 5, "hidden for a whole visibility timeout"
        found = app.clients.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get(
            "Messages", [])
    assert [m["Body"] for m in found] == ['{"job_id":"orphaned","epoch":1}']


def test_a_long_polled_batch_taken_to_run_gets_the_full_visibility(
        app: Leasehold, running: tuple[PollingWorker, Recorder]) -> None:
    worker, recorder = running
    _wait_listening(worker)
    url = app.queues.url("default", "high")
    app.clients.sqs.send_message(QueueUrl=url, MessageBody='{"job_id":"mine","epoch":1}')
    assert recorder.arrived.wait(5)
    time.sleep(3)  # past the long poll's own visibility
    assert app.clients.sqs.receive_message(QueueUrl=url).get("Messages", []) == []
