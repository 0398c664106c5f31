"""An ECS worker protects its task from scale-in while it has jobs in flight, and only then."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from leasehold.aws.queues import Received
from leasehold.polling import poller
from leasehold.polling.poller import PollerOptions, PollingWorker
from leasehold.polling.task_protection import TaskProtection

AGENT = "http://169.254.170.2/api/abc"


class Agent:
    """The ECS agent's endpoint: records each state the worker sets."""

    def __init__(self) -> None:
        self.states: list[dict[str, Any]] = []

    def put(self, url: str, body: bytes) -> None:
        assert url == f"{AGENT}/task-protection/v1/state"
        self.states.append(json.loads(body))


@pytest.fixture
def agent() -> Agent:
    return Agent()


def _polling(agent: Agent, clock: list[float] | None = None) -> PollingWorker:
    app: Any = SimpleNamespace(now=lambda: 0)
    protection = TaskProtection(AGENT, expires_minutes=30, put=agent.put,
                                clock=(lambda: clock[0]) if clock else lambda: 0.0)
    return PollingWorker(app, PollerOptions(), worker=SimpleNamespace(worker_id="w", running=set()),
                         protection=protection)


def _message() -> Received:
    return Received("url", "receipt", "id", '{"job_id":"j","epoch":1}', 1, "acme")


def test_a_worker_is_protected_while_its_batch_runs_and_released_once_idle(
        agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    polling = _polling(agent)
    during: list[list[dict[str, Any]]] = []
    monkeypatch.setattr(poller, "consume", lambda *_: during.append(list(agent.states)))
    monkeypatch.setattr(poller.fleet, "heartbeat", lambda *_, **__: None)
    polling._run([_message()])
    # Protected before the job started.
    assert during == [[{"ProtectionEnabled": True, "ExpiresInMinutes": 30}]]
    polling.beat()  # idle now
    assert agent.states[-1] == {"ProtectionEnabled": False}
    polling.beat()  # still idle: nothing more to say
    assert len(agent.states) == 2


def test_a_long_job_renews_its_protection_before_it_expires(agent: Agent) -> None:
    now = [0.0]
    protection = TaskProtection(AGENT, expires_minutes=30, put=agent.put, clock=lambda: now[0])
    protection.busy()
    now[0] = 10 * 60
    protection.busy()  # a third of its life: still protected, no request
    assert len(agent.states) == 1
    now[0] = 16 * 60
    protection.busy()  # past half its life: renewed
    assert [s["ProtectionEnabled"] for s in agent.states] == [True, True]


def test_protection_is_only_used_on_ecs() -> None:
    assert TaskProtection.from_env({}) is None
    protection = TaskProtection.from_env({"ECS_AGENT_URI": AGENT})
    assert protection is not None and protection.url.startswith(AGENT)


def test_an_unreachable_agent_never_stops_the_worker() -> None:
    def refuse(url: str, body: bytes) -> None:
        raise OSError("connection refused")

    protection = TaskProtection(AGENT, put=refuse)
    protection.busy()
    assert not protection.protected
