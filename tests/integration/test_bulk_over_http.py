"""The CLI and the client against the API over real HTTP (the local gateway over moto).

``leasehold jobs bulk ... --wait`` crashed with ``KeyError: 'bulk_id'`` (issue 30, 4): it
follows ``GET /jobs/bulk/{id}``, which answered without it. And an internal task
(``leasehold.bulk``) is refused from the CLI and the client as from the API (issue 29, 13).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from leasehold.api.app import handle
from leasehold.api.context import ApiConfig
from leasehold.cli import bulk as cli_bulk
from leasehold.cli import main
from leasehold.client import ApiError, Client
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.local.gateway import Gateway

from .helpers import deliver


@pytest.fixture
def url(app: Leasehold, registry: TaskRegistry) -> Iterator[str]:
    registry.task("work")(lambda payload, ctx: payload)
    config = ApiConfig(trust_tenant_header=True)
    gateway = Gateway("127.0.0.1", 0, lambda event: handle(app, event, None, config))
    thread = threading.Thread(target=gateway.serve_forever, daemon=True)
    thread.start()
    try:
        yield gateway.url
    finally:
        gateway.shutdown()
        gateway.server_close()


def test_jobs_bulk_wait_follows_the_bulk_job_to_its_end(
        app: Leasehold, url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    client = Client(url, tenant="acme")
    waiting = [client.submit("work", i, delay_seconds=3600).job_id for i in range(3)]
    polls: list[int] = []

    def meanwhile(seconds: float) -> None:
        """The CLI's pause between two polls: the worker runs the bulk job meanwhile."""
        polls.append(deliver(app, once=True))

    monkeypatch.setattr(cli_bulk.time, "sleep", meanwhile)
    code = main(["jobs", "bulk", "cancel", "--wait", "--json", "--url", url,
                 "--tenant", "acme"])
    out, err = capsys.readouterr()
    assert code == 0, err
    shown = json.loads(out)
    assert shown["state"] == "SUCCEEDED" and shown["result"]["done"] == 3, shown
    assert shown["bulk_id"] == shown["job_id"] and shown["created_before"]
    assert polls and polls[0] == 1  # it did poll GET /jobs/bulk/{id}, through the worker
    assert [j.state for j in app.store.batch_get(waiting)] == [JobState.CANCELLED] * 3
    # Plain text too: the bulk job, its counts and its bound.
    assert main(["jobs", "bulk", "cancel", "--wait", "--url", url, "--tenant", "acme"]) == 0
    text = capsys.readouterr().out
    assert "SUCCEEDED" in text and "created before" in text


def test_an_internal_task_is_refused_from_the_client_and_the_cli(
        app: Leasehold, url: str, capsys: pytest.CaptureFixture[str]) -> None:
    client = Client(url, tenant="acme")
    with pytest.raises(ApiError) as refused:
        client.submit("leasehold.bulk", {"action": "delete", "filter": {}})
    assert refused.value.status == 422 and "internal" in str(refused.value)
    code = main(["submit", "leasehold.bulk", "{}", "--url", url, "--tenant", "acme"])
    assert code != 0
    assert "internal" in capsys.readouterr().err
    assert client.request("GET", "/jobs")["jobs"] == []
