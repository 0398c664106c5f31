"""HTTP targets: what one costs, and how exactly a per-host limit holds under a burst.

* requests and write units per HTTP target job through submission and the worker (as
  Lambda's event source drives it), on a private emulator, against a local HTTP server,
  metered like :mod:`bench.per_job`, and the dollars per million jobs (:mod:`bench.cost`,
  with the worker's measured seconds per job);
* per-host limit accuracy: a burst of jobs to one host of concurrency ``limit``, run by
  several worker threads; the most requests in flight at the server, and the burst's time
  against the ideal ``jobs / limit * hold``.

``python -m bench.targets`` prints the figures as JSON. Not part of ``make test``.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

from bench import cost
from bench.local import fake_credentials, library_app
from bench.per_job import Bench
from leasehold.aws import provision
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Worker
from leasehold.local import emulator
from leasehold.settings import PRIORITIES
from tests.integration.target_server import Request, serve

LOOPBACK = {"http_allow": ["127.0.0.0/8", "::1"]}


def per_job(*, batch: int = 20) -> dict[str, Any]:
    fake_credentials()
    server = emulator.start()
    web = serve()
    site = next(web)
    try:
        app = library_app(server.endpoint, targets=LOOPBACK)
        provision.create_all(app.clients, app.settings)
        bench = Bench(app)

        def run() -> None:
            tenant = "h" + uuid.uuid4().hex[:8]
            for i in range(batch):
                submit(app, JobSpec(tenant=tenant, target={"http": {
                    "url": f"{site.url}/hook", "method": "POST", "body": {"i": i}}}))
            bench.run(batch)

        run()  # warm up
        started = time.monotonic()
        usage = bench.measure(run).per(batch)
        seconds = (time.monotonic() - started) / batch
        figures = {k: usage[k] for k in ("requests", "dynamodb_requests", "sqs_requests",
                                         "eventbridge_requests", "eventbridge_entries",
                                         "write_units", "read_units",
                                         "requests_by_operation")}
        figures["seconds_per_job_here"] = round(seconds, 4)
        # The worker's share of a job on Lambda: the call itself (a local server answers in
        # ~1 ms; a partner's API is the job's real duration) plus Leasehold's own requests.
        figures["dollars_per_million"] = cost.leasehold(figures, worker_seconds=seconds)
        return figures
    finally:
        web.close()
        server.stop()


def limit_accuracy(*, jobs: int = 40, limit: int = 4, hold: float = 0.2,
                   threads: int = 8) -> dict[str, Any]:
    fake_credentials()
    server = emulator.start()
    web = serve()
    site = next(web)

    def held(request: Request) -> tuple[int, dict[str, str], bytes]:
        time.sleep(hold)
        return 200, {}, b""

    site.default = held
    host = site.url.removeprefix("http://")
    try:
        app = library_app(server.endpoint, targets={
            **LOOPBACK, "http_hosts": {host: {"concurrency": limit}}})
        provision.create_all(app.clients, app.settings)
        ids = [submit(app, JobSpec(target={"http": {"url": f"{site.url}/{n}"}})).job.job_id
               for n in range(jobs)]
        done = threading.Event()

        def loop() -> None:
            worker = Worker(app)
            while not done.is_set():
                got = False
                for priority in PRIORITIES:
                    batch = app.queues.receive(app.queues.url("default", priority),
                                               max_messages=1)
                    if batch:
                        consume(worker, batch)
                        got = True
                if not got:
                    time.sleep(0.02)

        workers = [threading.Thread(target=loop, daemon=True) for _ in range(threads)]
        start = time.monotonic()
        for worker in workers:
            worker.start()
        while not all(j.state is JobState.SUCCEEDED for j in app.store.batch_get(ids)):
            time.sleep(0.05)
        took = time.monotonic() - start
        done.set()
        return {"jobs": jobs, "limit": limit, "worker_threads": threads, "hold_seconds": hold,
                "most_in_flight": site.most_in_flight, "seconds": round(took, 2),
                "ideal_seconds": round(jobs / limit * hold, 2)}
    finally:
        web.close()
        server.stop()


if __name__ == "__main__":
    print(json.dumps({"per_job": per_job(), "limit": limit_accuracy()}, indent=2))
