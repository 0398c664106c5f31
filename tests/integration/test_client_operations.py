"""The Python client's operating calls against the real API handler (in-process moto):
concurrency keys seen and paused, pools paused by an operator only, dead letters redriven,
bulk actions, and the figures, each as the tenant the client speaks for."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import pytest

from leasehold.api.context import ApiConfig
from leasehold.cli import main as cli_main
from leasehold.cli.client import Client as CliClient
from leasehold.client import ApiError, Client
from leasehold.core.context import JobContext
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from tests.conftest import MakeApp
from tests.integration.api_client import ApiClient
from tests.integration.helpers import deliver


@pytest.fixture
def app(make_app: MakeApp, registry: TaskRegistry) -> Leasehold:
    @registry.task("sync", concurrency={"key": "acct/{payload.account}", "limit": 1})
    def sync(payload: Any, ctx: JobContext) -> Any:
        return payload

    @registry.task("boom", max_attempts=1)
    def boom(payload: Any, ctx: JobContext) -> Any:
        raise RuntimeError("boom")

    return make_app()


def client_for(app: Leasehold, tenant: str, **config: Any) -> Client:
    """A :class:`Client` whose requests go through the API handler in this process."""
    api = ApiClient(app, ApiConfig(trust_tenant_header=True, **config))

    def transport(method: str, url: str, headers: Mapping[str, str], body: bytes | None,
                  timeout: float) -> tuple[int, Mapping[str, str], bytes]:
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        reply = api.call(method, target, raw=body, headers=dict(headers))
        return reply.status, reply.headers, json.dumps(reply.body).encode()

    return Client("http://api.test", tenant=tenant, transport=transport, sleep=lambda _: None)


def test_a_tenant_sees_and_pauses_its_own_keys_only(app: Leasehold) -> None:
    acme, other = client_for(app, "acme"), client_for(app, "other")
    job = acme.submit("sync", {"account": "a/1"})
    other.submit("sync", {"account": "a/1"})
    deliver(app)
    assert job.result(timeout=0) == {"account": "a/1"}

    key = "acct/a/1"  # a slash in a key is one path segment, never a route
    assert acme.pause_key(key)["paused"] is True
    assert acme.pause_key(key)["paused"] is True  # pausing twice is pausing once
    assert acme.flow_key(key)["paused"] is True
    assert [k["key"] for k in acme.flow_keys() if k["paused"]] == [key]
    assert other.flow_key(key)["paused"] is False  # the same key of another tenant
    waiting = acme.submit("sync", {"account": "a/1"})
    deliver(app)
    assert waiting.status() == JobState.QUEUED.value
    assert acme.resume_key(key)["paused"] is False
    deliver(app)
    assert waiting.result(timeout=0) == {"account": "a/1"}
    assert key in [k["key"] for k in acme.stats()["keys"]]


def test_only_an_operator_pauses_a_pool(app: Leasehold) -> None:
    pool = app.settings.pools[0]
    with pytest.raises(ApiError) as refused:
        client_for(app, "acme").pause_pool(pool)
    assert refused.value.status == 403
    ops = client_for(app, "ops", operators=frozenset({"ops"}))
    assert ops.pause_pool(pool) == {"pool": pool, "paused": True}
    assert ops.resume_pool(pool) == {"pool": pool, "paused": False}
    with pytest.raises(ApiError) as unknown:
        ops.pause_pool("no-such-pool")
    assert unknown.value.status == 422


def test_dead_letters_redrive_bulk_and_figures(app: Leasehold) -> None:
    acme = client_for(app, "acme")
    dead = [acme.submit("boom", i).job_id for i in range(3)]
    deliver(app)
    assert sorted(j["job_id"] for j in acme.dead_letters()) == sorted(dead)
    assert client_for(app, "other").dead_letters() == []
    boom = next(t for t in acme.task_stats()["tasks"] if t["task"] == "boom")
    assert (boom["hour"]["failed"], boom["hour"]["succeeded"]) == (3, 0)

    assert acme.bulk("retry", dry_run=True, task="boom")["matches"] == 3
    redriven = acme.redrive(app.settings.pools[0], task="boom", limit=1)
    assert len(redriven["redriven"]) == 1
    started = acme.bulk("retry", task="boom")
    assert acme.bulk_status(started["bulk_id"])["job_id"] == started["bulk_id"]
    deliver(app)
    assert acme.bulk_status(started["bulk_id"])["state"] == JobState.SUCCEEDED.value


def test_a_listing_filters_by_label_from_the_client_and_the_cli(
        app: Leasehold, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``leasehold list`` had no ``--label`` while the API, the console and ``jobs bulk``
    had one (issue 47)."""
    client = client_for(app, "acme")
    prod = client.submit("boom", 1, labels={"env": "prod", "team": "a"})
    client.submit("boom", 2, labels={"env": "staging", "team": "a"})
    client.submit("boom", 3)
    assert [j["job_id"] for j in client.list(label="env:prod")["jobs"]] == [prod.job_id]
    both = client.list(label=["team:a", "env:prod"])["jobs"]
    assert [j["job_id"] for j in both] == [prod.job_id]
    assert len(client.list(label="team:a")["jobs"]) == 2
    monkeypatch.setattr(CliClient, "from_args", classmethod(lambda cls, args: client))
    assert cli_main(["list", "--label", "env:prod", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [j["job_id"] for j in listed["jobs"]] == [prod.job_id]
