"""Jobs with no code run on a Python pool (issue 43, defect 7).

With ``pools=("images", "default")`` and ``images`` external, an HTTP target job went to
``images``: ``POST /workers/lease`` handed ``leasehold.http`` and its payload to a remote
worker, and no Python worker ever ran it. Built-in target tasks now run on the targets pool
(the first Python pool unless the deployment names one), a job may not name an external
pool, and a configuration with targets and no Python pool is refused.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from leasehold.core.states import JobState
from leasehold.errors import ValidationError
from leasehold.lifecycle.app import Leasehold
from leasehold.settings import Settings
from tests.conftest import MakeApp
from tests.integration.api_client import api_for
from tests.integration.helpers import deliver
from tests.integration.target_server import Network, Server, loopback_only, serve

EXTERNAL = {"images": ("resize",)}
TARGETS = {"http_allow": ["127.0.0.0/8"]}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    guarded: Network = loopback_only(monkeypatch)
    yield from serve()
    assert guarded.refused == []


@pytest.fixture
def app(make_app: MakeApp) -> Leasehold:
    return make_app(pools=("images", "default"), external_tasks=EXTERNAL, targets=TARGETS)


def test_an_http_target_runs_on_the_python_pool_and_is_never_leased_by_a_remote_worker(
        app: Leasehold, server: Server) -> None:
    api = api_for(app)
    made = api.post("/jobs", {"target": {"http": {"url": f"{server.url}/hook"}}},
                    tenant="acme")
    assert made.status == 201, made.body
    job_id = made.body["job_id"]
    assert api.get(f"/jobs/{job_id}", tenant="acme").body["pool"] == "default"
    leased = api.post("/workers/lease", {"pool": "images", "wait_seconds": 0})
    assert leased.status == 200 and leased.body["jobs"] == []
    deliver(app, pool="default")
    assert app.store.get(job_id).state is JobState.SUCCEEDED
    assert [r.path for r in server.requests] == ["/hook"]


def test_a_target_job_may_not_name_an_external_pool(app: Leasehold) -> None:
    reply = api_for(app).post("/jobs", {"target": {"http": {"url": "https://a.example/"}},
                                        "pool": "images"})
    assert reply.status == 422 and "pool" in json.dumps(reply.body)
    assert app.clients.dynamodb.scan(TableName=app.settings.jobs_table)["Count"] == 0


def test_settings_refuse_targets_with_no_python_pool_or_an_external_targets_pool() -> None:
    with pytest.raises(ValidationError, match="external"):
        Settings(pools=("images",), external_tasks=EXTERNAL, targets=TARGETS).validate()
    with pytest.raises(ValidationError, match="external pool"):
        Settings(pools=("images", "default"), external_tasks=EXTERNAL,
                 targets_pool="images").validate()
    named = Settings(pools=("images", "default", "batch"), external_tasks=EXTERNAL,
                     targets_pool="batch")
    assert named.targets_runner() == "batch"
    assert Settings.from_env(named.to_env()).targets_pool == "batch"


def test_with_every_pool_external_and_no_targets_settings_targets_are_off(
        make_app: MakeApp) -> None:
    app = make_app(pools=("images",), external_tasks=EXTERNAL)
    reply = api_for(app).post("/jobs", {"target": {"http": {"url": "https://a.example/"}}})
    assert reply.status == 422 and "none in this deployment" in json.dumps(reply.body)


def test_leasehold_dev_with_targets_and_every_pool_external_is_refused_at_start(
        tmp_path: object) -> None:
    with socket.socket() as probe:  # a free port, were it to start
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = subprocess.run(
        [sys.executable, "-m", "leasehold.cli", "dev", "--pools", "images", "--external",
         "images:resize", "--in-memory", "--port", str(port), "--workers", "0"],
        env={**_environ(), "LEASEHOLD_TARGETS": json.dumps(TARGETS)},
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Python pool" in done.stderr and "external" in done.stderr


def _environ() -> dict[str, str]:
    import os
    return {k: v for k, v in os.environ.items() if not k.startswith("LEASEHOLD_")}
