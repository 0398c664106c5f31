"""What ``leasehold dev`` saves is one cut of its tables, even while the API and workers write
(issue 18, item 6).

The save used to scan the jobs table, then the others, through the API. A write that landed
between two of those scans was saved half: its job row without its slot, or its slot without
its row. Here the write is put exactly there, deterministically: the saving app reaches the
real emulator server through a proxy that, once the save's first request has been answered,
lets the write through before it hands that answer back. Whatever the save reads after its
first request, it reads after the write; a save that reads everything in one request under
the emulator's lock holds the state before the write, whole.
"""

from __future__ import annotations

import http.server
import json
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from leasehold.aws.clients import Clients
from leasehold.aws.dynamo import from_av
from leasehold.aws.provision import create_all
from leasehold.compose import compose
from leasehold.core.jobs import job_from_item
from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import COUNTED
from leasehold.local import state
from leasehold.settings import Settings

from .api_client import api_for
from .helpers import deliver, live_counted_jobs, tenant_live


class Interleaving(http.server.ThreadingHTTPServer):
    """A proxy to the emulator that runs ``between`` once, after answering the first request
    it forwards and before the caller sees that answer."""

    def __init__(self, target: str, between: Callable[[], None]) -> None:
        self.target = target
        self.between: Callable[[], None] | None = between
        self.forwarded = 0
        super().__init__(("127.0.0.1", 0), _Forward)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Forward(http.server.BaseHTTPRequestHandler):
    server: Interleaving

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host",)}
        request = urllib.request.Request(self.server.target + self.path, data=body,
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, answer, got = response.status, response.read(), response.headers
        except urllib.error.HTTPError as exc:
            status, answer, got = exc.code, exc.read(), exc.headers
        self.server.forwarded += 1
        between, self.server.between = self.server.between, None
        if between is not None:
            between()  # the save's first read is done; nothing after it has been read yet
        self.send_response(status)
        for name in ("Content-Type", "x-amzn-RequestId"):
            if got.get(name):
                self.send_header(name, got[name])
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _settings_names(prefix: str) -> dict[str, Any]:
    return {"jobs_table": f"{prefix}-jobs", "schedules_table": f"{prefix}-schedules",
            "tenants_table": f"{prefix}-tenants", "coordination_table": f"{prefix}-coord",
            "workflows_table": f"{prefix}-workflows", "queue_prefix": prefix,
            "pools": ("default",), "shards": 2}


@pytest.fixture
def runs() -> list[str]:
    return []


@pytest.fixture
def make(endpoint: str, runs: list[str]) -> Callable[..., Leasehold]:
    """Apps on the real emulator server: ``make()`` over fresh tables, ``make(like=app,
    via=url)`` over the same tables as ``app`` through another address."""
    registry = TaskRegistry()

    @registry.task("echo")
    def echo(payload: Any, ctx: Any) -> Any:
        runs.append(ctx.job_id)
        return payload

    def build(like: Leasehold | None = None, via: str | None = None) -> Leasehold:
        names = _settings_names("c" + uuid.uuid4().hex[:8]) if like is None else {
            name: getattr(like.settings, name) for name in _settings_names("x")}
        settings = Settings(endpoint_url=via or endpoint, **names)
        clients = Clients(settings)
        if like is None:
            create_all(clients, settings)
        return compose(settings, registry=registry, clients=clients)

    return build


@pytest.fixture
def saved_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


def _save_with_a_write_after_its_first_read(app: Leasehold, make: Callable[..., Leasehold],
                                            directory: Path, write: Callable[[], None]
                                            ) -> None:
    proxy = Interleaving(app.settings.endpoint_url or "", write)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        saver = make(like=app, via=proxy.url)
        state.save(saver, directory)
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert proxy.between is None, "the write was never let through"


def _saved_slots_and_live_jobs(directory: Path, tenant: str) -> tuple[int, int]:
    """The tenant's live count and its live slot-holding jobs, as the file holds them."""
    tables = json.loads((directory / state.STATE_FILE).read_text())["tables"]
    live = sum(int(item.get("live", {"N": "0"})["N"]) for item in tables["tenants_table"]
               if item["tenant"]["S"].split("#")[0] == tenant)
    jobs = [job_from_item(from_av(item)) for item in tables["jobs_table"]]
    holding = sum(1 for job in jobs
                  if job.tenant == tenant and job.state.live and job.extra.get(COUNTED))
    return live, holding


def _restored(make: Callable[..., Leasehold], directory: Path) -> Leasehold:
    restored = make()  # fresh tables and queues, as a restarted runtime has
    state.load(restored, directory)
    return restored


def test_a_job_admitted_during_the_save_is_saved_with_its_slot_or_not_at_all(
        make: Callable[..., Leasehold], saved_dir: Path, runs: list[str]) -> None:
    app = make()
    api = api_for(app, max_live=1)

    def admit() -> None:
        reply = api.post("/jobs", {"task": "echo", "payload": 1}, tenant="acme")
        assert reply.status == 201, reply.body

    _save_with_a_write_after_its_first_read(app, make, saved_dir, admit)
    live, holding = _saved_slots_and_live_jobs(saved_dir, "acme")
    assert live == holding, f"saved {live} slot(s) held by {holding} live job(s)"

    restored = _restored(make, saved_dir)
    assert tenant_live(restored, "acme") == live_counted_jobs(restored, "acme")
    # The tenant's one slot is free after the restore: no job that does not exist holds it.
    reply = api_for(restored, max_live=1).post("/jobs", {"task": "echo"}, tenant="acme")
    assert reply.status == 201, reply.body


def test_a_job_that_finishes_during_the_save_runs_once_after_the_restore(
        make: Callable[..., Leasehold], saved_dir: Path, runs: list[str]) -> None:
    app = make()
    api = api_for(app, max_live=1)
    job = api.post("/jobs", {"task": "echo", "payload": 2}, tenant="acme").body["job_id"]

    def finish() -> None:
        assert deliver(app) == 1
        assert app.store.get(job).state.value == "SUCCEEDED"

    _save_with_a_write_after_its_first_read(app, make, saved_dir, finish)
    live, holding = _saved_slots_and_live_jobs(saved_dir, "acme")
    assert live == holding, f"saved {live} slot(s) held by {holding} live job(s)"

    ran_before = runs.count(job)
    restored = _restored(make, saved_dir)
    deliver(restored)  # whatever the restore handed off
    # Saved before it finished (it runs once in the restored tables, as work finished after
    # the last save does) or after (it does not run): never a slot given back twice (-1).
    assert runs.count(job) - ran_before <= 1
    assert tenant_live(restored, "acme") == live_counted_jobs(restored, "acme") == 0
