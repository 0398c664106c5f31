"""AWS requests and DynamoDB capacity units per job, for each kind of job.

Each kind runs a batch of 10 jobs through the real code paths (submission or ticker, the
worker as Lambda's event source drives it, the batched delete) on a private emulator, with
the :mod:`bench.metering` hooks on the app's clients; the totals are divided by 10.

The app publishes job state events to an EventBridge bus, as the CDK stack configures it:
terminal states only (``LEASEHOLD_PUBLISH=terminal``, the deployed default), sent in PutEvents
requests of up to 10 per worker batch. ``immediate_publish_all`` is the immediate job with
every state published (``all``), so the cost of that choice is visible.
Receives are counted only when they return messages: the minimum a consumer needs is one
receive per batch of up to 10, and idle polling is a cost per worker, not per job.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from bench.local import fake_credentials, library_app
from bench.metering import Meter, Usage
from leasehold.api.app import handle
from leasehold.api.context import ApiConfig
from leasehold.aws import provision
from leasehold.aws.clients import Clients
from leasehold.aws.queues import Queues, Received
from leasehold.core.spec import JobSpec
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Worker
from leasehold.local import emulator
from leasehold.local.gateway import proxy_event
from leasehold.settings import PRIORITIES
from leasehold.tenancy.admission import Limits
from leasehold.time import schedules, ticker

BATCH = 10
EVENT_BUS = "leasehold-bench-events"


class Bench:
    def __init__(self, app: Leasehold) -> None:
        self.app = app
        self.meter = Meter(app.clients, app.settings)
        self.worker = Worker(app)
        # Polls go through an unhooked client; each one that returns messages is counted.
        self.poller = Queues(Clients(app.settings), app.settings)
        for priority in PRIORITIES:  # URLs come from settings on AWS: no GetQueueUrl per job
            app.queues.url("default", priority)
            self.poller.url("default", priority)
        self.url = self.poller.url("default", "normal")

    def run(self, expected: int, *, timeout: float = 30) -> float:
        """Receive and consume ``expected`` messages; returns seconds spent consuming."""
        got = 0
        spent = 0.0
        deadline = time.monotonic() + timeout
        while got < expected:
            batch: list[Received] = self.poller.receive(self.url, max_messages=10,
                                                        wait_seconds=1, visibility_seconds=60)
            if not batch:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"only {got} of {expected} messages arrived")
                continue
            self.meter.usage.add(Usage(requests={"sqs.ReceiveMessage": 1}))
            started = time.perf_counter()
            consume(self.worker, batch)
            spent += time.perf_counter() - started
            got += len(batch)
        return spent

    def measure(self, body: Callable[[], Any]) -> Usage:
        self.meter.reset()
        body()
        return self.meter.reset()


def _tenant() -> str:
    return "r" + uuid.uuid4().hex[:10]


def measure_all(*, batch: int = BATCH, timed: int = 3 * BATCH) -> dict[str, Any]:
    """Requests and units per job for each kind, on an emulator of its own.

    ``batch`` jobs of each kind are metered; ``timed`` more are timed without the meter.
    """
    fake_credentials()
    server = emulator.start()
    try:
        # As deployed: the stack names an event bus and publishes terminal states only.
        app = library_app(server.endpoint, event_bus=EVENT_BUS, publish="terminal")
        provision.create_all(app.clients, app.settings)
        app.clients.client("events").create_event_bus(Name=EVENT_BUS)
        bench = Bench(app)
        results: dict[str, Any] = {}

        def immediate() -> None:
            tenant = _tenant()
            for _ in range(batch):
                submit(app, JobSpec(task="bench.noop", tenant=tenant))
            bench.run(batch)

        # Warm up (first requests build clients and cache URLs), then measure.
        immediate()
        results["immediate"] = bench.measure(immediate).per(batch)

        # The same with every state published (LEASEHOLD_PUBLISH=all), on the same tables.
        every = Bench(library_app(server.endpoint, event_bus=EVENT_BUS, publish="all"))

        def immediate_all() -> None:
            tenant = _tenant()
            for _ in range(batch):
                submit(every.app, JobSpec(task="bench.noop", tenant=tenant))
            every.run(batch)

        immediate_all()
        results["immediate_publish_all"] = every.measure(immediate_all).per(batch)

        def delayed() -> None:
            tenant = _tenant()
            for _ in range(batch):
                submit(app, JobSpec(task="bench.noop", tenant=tenant, delay_seconds=1))
            bench.run(batch)

        results["delayed"] = bench.measure(delayed).per(batch)

        def retried() -> None:
            tenant = _tenant()
            for _ in range(batch):
                submit(app, JobSpec(task="bench.fail_once", tenant=tenant))
            bench.run(batch)  # attempt 1 fails and is re-queued
            bench.run(batch)  # attempt 2 succeeds

        results["retried"] = bench.measure(retried).per(batch)

        # A cron occurrence: the ticker's share (a tick firing 10 schedules minus an empty
        # tick) plus the worker's. The empty tick's own reads are reported under scaling.
        # Recurring schedules (every 3 s) and a 4 s lookahead: each tick fires exactly one
        # occurrence per schedule and moves its cursor, as a long-lived schedule's tick does.
        tenant = _tenant()
        empty = bench.measure(lambda: ticker.tick(app, lookahead_seconds=4))
        made = [schedules.create(app, {"cron": "rate(3 seconds)", "task": "bench.noop"},
                                 tenant=tenant) for _ in range(batch)]
        fired = bench.measure(lambda: ticker.tick(app, lookahead_seconds=4))
        worked = bench.measure(lambda: bench.run(batch))
        occurrence = fired.minus(empty)
        occurrence.add(worked)
        results["cron_occurrence"] = occurrence.per(batch)
        for schedule in made:
            schedules.pause(app, schedule.schedule_id, tenant)
        results["empty_tick"] = empty.per(1)

        # The same immediate job submitted through the API handler (as API Gateway calls it).
        config = ApiConfig(trust_tenant_header=True,
                           limits=Limits(rate=1e6, burst=1e6, max_live=10**8,
                                         max_backlog=10**8))
        api_tenant = _tenant()

        def via_api(count: int) -> float:
            spent = 0.0
            for _ in range(count):
                event = proxy_event("POST", "/jobs", {"X-Leasehold-Tenant": api_tenant,
                                                      "Content-Type": "application/json"},
                                    '{"task": "bench.noop"}')
                started = time.perf_counter()
                reply = handle(app, event, None, config)
                spent += time.perf_counter() - started
                assert reply["statusCode"] == 201, reply
            bench.run(count)
            return spent

        via_api(1)  # warm: the API instance has read the tenant's bucket once
        results["immediate_via_api"] = bench.measure(lambda: via_api(batch)).per(batch)

        # Worker time per job without the meter's extra reads (the Lambda GB-s input).
        bench.meter.enabled = False
        tenant = _tenant()
        for _ in range(timed):
            submit(app, JobSpec(task="bench.noop", tenant=tenant))
        spent = bench.run(timed)
        results["worker_seconds_per_job"] = round(spent / timed, 4)
        results["api_seconds_per_request"] = round(via_api(timed) / timed, 4)
        return results
    finally:
        server.stop()
