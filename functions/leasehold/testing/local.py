"""An in-process Leasehold over moto for tests: the real API, store, queues and worker in
the test's own thread, driven through the real :class:`~leasehold.client.Client`."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from leasehold.api.app import handle
from leasehold.api.context import ApiConfig
from leasehold.aws.clients import Clients
from leasehold.aws.provision import create_all
from leasehold.client import Client
from leasehold.client.handle import TERMINAL
from leasehold.compose import compose
from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.worker import Worker
from leasehold.local.gateway import proxy_event
from leasehold.settings import PRIORITIES, Settings


class LocalLeasehold:
    """Tables and queues with fresh names in the current moto mock, and a client whose
    requests go straight to the API handler (no socket).

    Jobs run in the test's thread: :meth:`run_jobs` runs every job that is ready, and so does
    every read through the client first, so ``client.submit(...).result()`` returns the
    result. (Delayed jobs run once their delay has passed and something reads.)
    """

    def __init__(self, *, registry: TaskRegistry | None = None, tenant: str = "default",
                 pools: tuple[str, ...] = ("default",), **settings: Any) -> None:
        prefix = "lh" + uuid.uuid4().hex[:8]
        values: dict[str, Any] = {
            "jobs_table": f"{prefix}-jobs", "schedules_table": f"{prefix}-schedules",
            "tenants_table": f"{prefix}-tenants", "coordination_table": f"{prefix}-coord",
            "workflows_table": f"{prefix}-workflows", "queue_prefix": prefix, "shards": 4,
            "pools": pools, "event_bus": None, **settings}
        self.settings = Settings(**values)
        clients = Clients(self.settings)
        create_all(clients, self.settings)
        self.app: Leasehold = compose(self.settings, registry=registry, clients=clients)
        self.worker = Worker(self.app)
        self.api_config = ApiConfig(trust_tenant_header=True)
        self.client = Client("http://leasehold.test", tenant=tenant, transport=self._send)

    def run_jobs(self, rounds: int = 20) -> int:
        """Run every job that is ready now (and the retries they make ready); how many ran."""
        ran = 0
        for _ in range(rounds):
            batch = 0
            for pool in self.settings.pools:
                for priority in PRIORITIES:
                    url = self.app.queues.url(pool, priority)
                    while received := self.app.queues.receive(url, max_messages=10):
                        consume(self.worker, received)
                        batch += len(received)
            ran += batch
            if not batch:
                break
        return ran

    def _send(self, method: str, url: str, headers: Mapping[str, str], body: bytes | None,
              timeout: float) -> tuple[int, Mapping[str, str], bytes]:
        target = urlsplit(url.removeprefix(self.client.url))
        query = parse_qs(target.query)
        # A long poll here would hold the only thread that runs jobs: run them between short
        # reads instead, for as long as the poll asked to wait.
        wait = float(query.pop("wait_seconds", ["0"])[0]) if method == "GET" else 0.0
        path = target.path + ("?" + urlencode(query, doseq=True) if query else "")
        deadline = time.monotonic() + wait
        while True:
            if method == "GET":
                self.run_jobs()
            response = handle(self.app, proxy_event(method, path, headers, body), None,
                              self.api_config)
            answer = response.get("body") or ""
            if time.monotonic() >= deadline or '"state":' not in answer or \
                    json.loads(answer).get("state") in TERMINAL:
                break
            time.sleep(0.05)
        sent = {k: str(v) for k, v in (response.get("headers") or {}).items()}
        return int(response["statusCode"]), sent, answer.encode()

    def job(self, job_id: str) -> dict[str, Any]:
        """The job as the API shows it (without running anything first)."""
        event = proxy_event("GET", f"/jobs/{job_id}",
                            {"X-Leasehold-Tenant": self.client.tenant or "default"})
        answer: dict[str, Any] = json.loads(handle(self.app, event, None,
                                                   self.api_config)["body"])
        return answer
