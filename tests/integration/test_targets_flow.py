"""Per-host flow control by default, against a real moto server process (atomic across the
worker threads) and local HTTP servers that count the requests in flight at once.

Every HTTP target job carries the concurrency key ``http:{host}``: ten jobs to a host of
concurrency 2 never have more than 2 requests at the server, and a second host's jobs are
not held behind them.
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
from leasehold.clock import SystemClock
from leasehold.compose import compose
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Worker
from leasehold.settings import PRIORITIES, Settings
from tests.integration.target_server import Request, Server, serve

HOLD_SECONDS = 0.3


def held(request: Request) -> tuple[int, dict[str, str], bytes]:
    time.sleep(HOLD_SECONDS)
    return 200, {}, b"done"


@pytest.fixture
def servers() -> Iterator[tuple[Server, Server]]:
    first, second = serve(), serve()
    try:
        yield next(first), next(second)
    finally:
        first.close()
        second.close()


def app_for(endpoint: str, targets: dict[str, Any]) -> Leasehold:
    prefix = "f" + uuid.uuid4().hex[:8]
    settings = Settings(
        endpoint_url=endpoint, jobs_table=f"{prefix}-jobs", schedules_table=f"{prefix}-sch",
        tenants_table=f"{prefix}-ten", coordination_table=f"{prefix}-co",
        workflows_table=f"{prefix}-wf", queue_prefix=prefix, pools=("default",), shards=2,
        targets=targets)
    clients = Clients(settings)
    create_all(clients, settings)
    return compose(settings, registry=TaskRegistry(), clients=clients, clock=SystemClock())


def work(app: Leasehold, threads: int, done: threading.Event) -> list[threading.Thread]:
    """``threads`` workers, each leasing one message at a time until ``done``."""
    def loop() -> None:
        worker = Worker(app)
        while not done.is_set():
            got = 0
            for priority in PRIORITIES:
                batch = app.queues.receive(app.queues.url("default", priority), max_messages=1)
                if batch:
                    consume(worker, batch)
                    got += 1
            if not got:
                time.sleep(0.05)

    started = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
    for thread in started:
        thread.start()
    return started


def test_ten_jobs_to_a_host_of_concurrency_2_never_have_more_than_2_in_flight_and_another_host_is_not_held(  # noqa: E501
        endpoint: str, servers: tuple[Server, Server]) -> None:
    busy, other = servers
    busy.default = other.default = held
    busy_host = busy.url.removeprefix("http://")
    app = app_for(endpoint, {"http_allow": ["127.0.0.0/8", "::1"],
                             "http_hosts": {busy_host: {"concurrency": 2}}})
    ids = [submit(app, JobSpec(target={"http": {"url": f"{busy.url}/{n}"}})).job.job_id
           for n in range(10)]
    # The other host by another name (localhost): its own key, its own slots.
    port = other.url.rsplit(":", 1)[1]
    others = [submit(app, JobSpec(target={"http": {"url": f"http://localhost:{port}/o{n}"}})
                     ).job.job_id for n in range(2)]
    done = threading.Event()
    threads = work(app, 4, done)
    try:
        ends = time.monotonic() + 60
        while not all(j.state is JobState.SUCCEEDED for j in app.store.batch_get(ids + others)):
            assert time.monotonic() < ends, "the jobs did not all finish"
            time.sleep(0.1)
    finally:
        done.set()
        for thread in threads:
            thread.join(10)
    assert len(busy.requests) == 10 and len(other.requests) == 2
    assert busy.most_in_flight == 2  # the limit was reached, never passed
    # The other host's calls ran while the busy host still had calls waiting for a slot.
    assert max(r.at for r in other.requests) < max(r.at for r in busy.requests)
    job = app.store.get(ids[0])
    assert job.extra["lease_gate"]["concurrency"]["key"] == f"http:{busy_host}"
