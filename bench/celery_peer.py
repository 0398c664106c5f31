"""The Celery peer (issue 21): Celery 5 with the SQS broker and the DynamoDB result backend.

It runs on the same substrate as Leasehold in the same bench run (bench.substrate), so the
throughput ratio is taken against a peer, not a guess. Celery is not a dependency of
Leasehold: it is in the ``bench`` extra (``pip install -e '.[bench]'``, which ``make bench``
does). Its SQS transport (kombu 5.7) polls with pycurl, whose wheel bundles libcurl.

As a user would run it: the settings are Celery's defaults but the endpoint, fake
credentials and the queue name; worker processes with the ``threads`` pool, as many and as
wide as ``leasehold dev``'s (``--workers``, ``--concurrency``). The client submits ``echo``
tasks from 8 threads and waits for every result; the run lasts from the first submission to
the last result's ``date_done`` (as Leasehold's lasts to the last job's ``finished_at``).

The worker loads this module (``celery -A bench.celery_peer worker``) and finds the
substrate's endpoint in :data:`ENDPOINT_ENV`.
"""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench import process_cpu
from bench.local import ROOT, clean_env
from bench.substrate import Substrate, grew

ENDPOINT_ENV = "BENCH_CELERY_ENDPOINT"
QUEUE = "bench-celery"
RESULTS_TABLE = "bench-celery-results"


def make_app(endpoint: str) -> Any:
    """A Celery app whose broker (SQS) and result backend (DynamoDB) are at ``endpoint``."""
    from celery import Celery

    where = urlsplit(endpoint)
    app = Celery(
        "bench_peer",
        broker=f"sqs://bench:bench@{where.hostname}:{where.port}//",
        backend=f"dynamodb://bench:bench@{where.hostname}:{where.port}/{RESULTS_TABLE}")
    app.conf.update(
        broker_transport_options={"region": "us-east-1", "is_secure": False},
        dynamodb_endpoint_url=endpoint, task_default_queue=QUEUE,
        broker_connection_retry_on_startup=True, worker_hijack_root_logger=False,
        worker_send_task_events=False)

    @app.task(name="bench.echo", shared=False)  # one app per substrate in one process
    def echo(payload: Any) -> Any:
        return payload

    return app


if os.environ.get(ENDPOINT_ENV):  # loaded by `celery -A bench.celery_peer worker`
    app = make_app(os.environ[ENDPOINT_ENV])


def _workers(endpoint: str, processes: int, threads: int, log: Path
              ) -> list[subprocess.Popen[str]]:
    env = clean_env(**{ENDPOINT_ENV: endpoint})
    with log.open("a") as sink:  # a file, not a pipe nobody reads: it never blocks a worker
        return [subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "bench.celery_peer", "worker",
             "--pool", "threads", "--concurrency", str(threads), "--loglevel", "WARNING",
             "--without-gossip", "--without-mingle", "--without-heartbeat",
             "--hostname", f"peer{i}-{os.getpid()}@bench"],
            cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, text=True)
            for i in range(processes)]


def _stop(workers: list[subprocess.Popen[str]]) -> None:
    for process in workers:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in workers:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _done_at(result: Any) -> float:
    done = result.date_done
    if isinstance(done, str):
        done = datetime.datetime.fromisoformat(done)
    if done.tzinfo is None:
        done = done.replace(tzinfo=datetime.UTC)
    return float(done.timestamp())


def measure(substrate: Substrate, n: int, *, clients: int = 8, processes: int = 2,
            threads: int = 4, timeout: float = 300) -> dict[str, Any]:
    """``n`` echo tasks submitted from ``clients`` threads to Celery workers on
    ``substrate``; jobs per second and the substrate's requests per task."""
    from bench.local import fake_credentials

    fake_credentials()
    client = make_app(substrate.endpoint)
    echo = client.tasks["bench.echo"]
    log = Path(tempfile.mkdtemp(prefix="bench-celery-")) / "workers.log"
    workers = _workers(substrate.endpoint, processes, threads, log)
    try:
        # Warm: the queue and the results table exist, every worker consumes.
        warm = [echo.apply_async((i,)) for i in range(2 * processes)]
        try:
            for result in warm:
                result.get(timeout=120, interval=0.2)
        except Exception as exc:
            raise RuntimeError(f"the Celery peer did not answer: {exc!r}\n"
                               + log.read_text(errors="replace")[-3000:]) from exc
        before = substrate.counts()
        cpu = process_cpu.Meter()
        started = time.time()
        with ThreadPoolExecutor(clients) as pool:
            results = list(pool.map(lambda i: echo.apply_async((i,)), range(n)))
        submitted = time.time()
        deadline = time.monotonic() + timeout

        def wait(result: Any) -> Any:
            # A user's wait: AsyncResult.get polls the result backend (a GetItem a poll).
            return result.get(timeout=max(1.0, deadline - time.monotonic()), interval=0.5)

        with ThreadPoolExecutor(clients) as pool:
            answers = list(pool.map(wait, results))
        cpu_ms_per_job = cpu.per_job(n)  # the workers still run
        requests = grew(before, substrate.counts())
        finished = max(_done_at(r) for r in results)
    finally:
        _stop(workers)
        client.close()
    elapsed = finished - started
    return {
        "jobs": n, "clients": clients, "worker_processes": processes, "threads": threads,
        "seconds": round(elapsed, 3), "jobs_per_second": round(n / elapsed, 1),
        "submitted_per_second": round(n / (submitted - started), 1),
        "succeeded": sum(1 for i, a in enumerate(answers) if a == i),
        "requests_per_job": round(sum(requests.values()) / n, 2),
        "requests_by_operation": {op: round(c / n, 3) for op, c in sorted(requests.items())},
        "cpu_ms_per_job": cpu_ms_per_job,
    }
