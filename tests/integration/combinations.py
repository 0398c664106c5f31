"""What the combination tests share (docs/design.md, "Combinations: every option on every
lifecycle path"): tasks with flow options, the API as a tenant, and ways to lease, re-run and
drive jobs on a fixed clock."""


from __future__ import annotations

from typing import Any

import pytest

from leasehold.aws.queues import Message
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.flowcontrol import slot_id
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.flow import slots
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.store import Gated
from leasehold.time import ticker
from tests.conftest import MakeApp
from tests.integration.api_client import ApiClient, api_for
from tests.integration.helpers import deliver, receive_all

FAST = RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0)
TENANT = "acme"
#: Every write that changes a job row.
WRITES = "|".join(f"dynamodb.{op}" for op in ("UpdateItem", "TransactWriteItems"))


@pytest.fixture
def failing() -> dict[str, bool]:
    """Which payloads fail their next run (a test flips one to succeed)."""
    return {}


@pytest.fixture
def app(make_app: MakeApp, registry: TaskRegistry, failing: dict[str, bool]) -> Leasehold:
    @registry.task("sync", retry=FAST, max_attempts=1,
                   concurrency={"key": "k", "limit": 1})
    def sync(payload: Any, ctx: JobContext) -> Any:
        if failing.get(str(payload)):
            raise ValueError(f"{payload} fails")
        return payload

    @registry.task("call", retry=FAST, max_attempts=1,
                   throttle={"key": "api", "limit": 1, "period_seconds": 60, "burst": 1})
    def call(payload: Any, ctx: JobContext) -> Any:
        if failing.get(str(payload)):
            raise ValueError(f"{payload} fails")
        return payload

    @registry.task("plain", retry=FAST)
    def plain(payload: Any, ctx: JobContext) -> Any:
        if failing.get(str(payload)):
            raise ValueError(f"{payload} fails")
        return payload

    @registry.task("nap", retry=FAST, unique={"key": "nap"},
                   concurrency={"key": "n", "limit": 1})
    def nap(payload: Any, ctx: JobContext) -> Any:
        ctx.sleep(3600)
        return payload

    return make_app()


@pytest.fixture
def api(app: Leasehold) -> ApiClient:
    return api_for(app)


def post(api: ApiClient, task: str, payload: Any, **options: Any) -> str:
    reply = api.post("/jobs", {"task": task, "payload": payload, **options}, tenant=TENANT)
    assert reply.status in (200, 201), reply.body
    job_id: str = reply.body["job_id"]
    return job_id


def lease_visible(app: Leasehold, lease_ms: int = 60_000) -> dict[str, str]:
    """Lease every visible message without running anything: job id -> leased or gated."""
    out = {}
    for message in receive_all(app):
        parsed = Message.parse(message.body)
        try:
            app.store.lease(parsed.job_id, parsed.epoch, owner="w",
                            expires_at=app.now() + lease_ms, now=app.now(), actor="w",
                            gate=parsed.gate)
            out[parsed.job_id] = "leased"
        except Gated:
            out[parsed.job_id] = "gated"
    return out


def holders(app: Leasehold, key: str) -> set[str]:
    return slots.holders(slots.read(app.clients.dynamodb, app.settings, slot_id(TENANT, key)))


def run_bulk(app: Leasehold, clock: FakeClock, bulk_id: str) -> None:
    for _ in range(10):
        deliver(app, once=True)
        if app.store.get(bulk_id).state is JobState.SUCCEEDED:
            return
        clock.advance(150)
        ticker.promote_due(app)
        sweeper.sweep(app)
    raise AssertionError(app.store.get(bulk_id).history)


def no_delays(app: Leasehold, monkeypatch: pytest.MonkeyPatch) -> None:
    """Send every message at once: moto holds a delayed one for real seconds, and the clock
    is fixed (a message that comes early waits for its time on the clock, or is refused and
    delayed again)."""
    send = app.queues.send
    monkeypatch.setattr(app.queues, "send", lambda pool, priority, message, delay=0, **kw:
                        send(pool, priority, message, 0, **kw))


def states(app: Leasehold, ids: list[str]) -> list[JobState]:
    return [job.state for job in app.store.batch_get(ids)]

def rerun(app: Leasehold, api: ApiClient, clock: FakeClock, path: str, ids: list[str]) -> None:
    if path == "manual retry":
        for job_id in ids:
            reply = api.post(f"/jobs/{job_id}/retry", tenant=TENANT)
            assert reply.status == 200, reply.body
    elif path == "redrive":
        reply = api.post("/dead-letters/redrive", {"pool": "default"}, tenant=TENANT)
        assert sorted(reply.body["redriven"]) == sorted(ids), reply.body
    else:
        started = api.post("/jobs/bulk", {"action": "retry", "filter": {
            "label": ["rerun:yes"]}}, tenant=TENANT)
        assert started.status == 202, started.body
        bulk = started.body["bulk_id"]
        deliver(app, once=True)  # the bulk job (the re-run jobs' messages are taken below)
        assert app.store.get(bulk).state is JobState.SUCCEEDED
