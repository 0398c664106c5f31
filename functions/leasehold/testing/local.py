"""An in-process Leasehold over moto for tests: the real API, store, queues, worker, ticker
and sweeper in the test's own thread, on a test clock, driven through the real
:class:`~leasehold.client.Client`."""

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
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.worker import Worker
from leasehold.local import sqs_time
from leasehold.local.gateway import proxy_event
from leasehold.settings import PRIORITIES, Settings
from leasehold.testing.clock import EVERYTHING, Parts, TestClock, next_timer
from leasehold.time import ticker


class LocalLeasehold:
    """Tables and queues with fresh names in the current moto mock, and a client whose
    requests go straight to the API handler (no socket).

    Jobs run in the test's thread: :meth:`run_jobs` runs every job that is ready, and so does
    every read through the client first, so ``client.submit(...).result()`` returns the
    result.

    Time is :attr:`clock`'s (:class:`~leasehold.testing.clock.TestClock`), and moto's SQS
    follows it until :meth:`close`: it stands still until :meth:`advance` moves it, running
    what falls due on the way in time order. A wait for a result (``result()``, a read with
    ``wait_seconds``) skips ahead from timer to timer while the job is not finished, as
    Temporal's time-skipping test environment does (``skip_time=False``: it waits in wall
    time instead, and only :meth:`advance` moves the clock).
    """

    def __init__(self, *, registry: TaskRegistry | None = None, tenant: str = "default",
                 pools: tuple[str, ...] = ("default",), skip_time: bool = True,
                 **settings: Any) -> None:
        prefix = "lh" + uuid.uuid4().hex[:8]
        values: dict[str, Any] = {
            "jobs_table": f"{prefix}-jobs", "schedules_table": f"{prefix}-schedules",
            "tenants_table": f"{prefix}-tenants", "coordination_table": f"{prefix}-coord",
            "workflows_table": f"{prefix}-workflows", "queue_prefix": prefix,
            # One shard: the ticker, the sweeper and the test clock read each index once.
            "shards": 1,
            "pools": pools, "event_bus": None, **settings}
        self.settings = Settings(**values)
        clients = Clients(self.settings)
        if "targets_role_arn" not in settings:
            # sigv4 and AWS targets run under a targets role, as deployed: moto's STS answers
            # AssumeRole for it with keys of their own (leasehold.targets.credentials).
            account = clients.client("sts").get_caller_identity()["Account"]
            self.settings = self.settings.with_(
                targets_role_arn=f"arn:aws:iam::{account}:role/{prefix}-targets")
            clients = Clients(self.settings)
        create_all(clients, self.settings)
        self.clock = TestClock()
        self.skip_time = skip_time
        self.app: Leasehold = compose(self.settings, registry=registry, clients=clients,
                                      clock=self.clock)
        self.worker = Worker(self.app)
        self.api_config = ApiConfig(trust_tenant_header=True)
        self.client = Client("http://leasehold.test", tenant=tenant, transport=self._send)
        self._running = False  # jobs are running: a read from inside one runs no more
        self._region = clients.sqs.meta.region_name
        self.clock.bind(self.settle, lambda now: next_timer(self.app, now))
        sqs_time.follow(self.clock.now_ms)

    def close(self) -> None:
        """moto's SQS reads the wall clock again."""
        sqs_time.unfollow(self.clock.now_ms)

    def advance(self, seconds: float) -> int:
        """Move the clock ``seconds`` ahead, running what falls due on the way, in time
        order (:meth:`TestClock.advance <leasehold.testing.clock.TestClock.advance>`)."""
        return self.clock.advance(seconds)

    def settle(self, parts: Parts = EVERYTHING) -> None:
        """What the deployed scheduler does at this time: the ticker's pass and the
        sweeper's (of those in ``parts``), then every job that is ready."""
        if "ticker" in parts:
            # Looking no further ahead than the clock: what is due later waits in its
            # index (SCHEDULED, SLEEPING) until its time, and then runs at once.
            ticker.tick(self.app, lookahead_seconds=0)
        if "sweeper" in parts:
            sweeper.sweep(self.app)
        self.run_jobs()

    def run_jobs(self, rounds: int = 20) -> int:
        """Run every job that is ready now (and the retries they make ready); how many ran."""
        if self._running:
            return 0
        self._running = True
        try:
            return self._run_rounds(rounds)
        finally:
            self._running = False

    def _run_rounds(self, rounds: int) -> int:
        ran = 0
        for _ in range(rounds):
            batch = 0
            for pool in self.settings.pools:
                for priority in PRIORITIES:
                    url = self.app.queues.url(pool, priority)
                    if not sqs_time.receivable(url, region=self._region):
                        continue  # a look at moto's queue costs no request
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
            if not (self.skip_time and not self._running and self.clock.skip()):
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
