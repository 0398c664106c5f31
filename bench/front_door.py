"""The front door under concurrency, as users submit (issue 21), on each substrate.

On one substrate (bench.substrate: the embedded emulator, or DynamoDB Local with moto for
SQS) and in this order, so nothing else asks it for anything meanwhile:

1. the floor: the bare calls a job needs (bench.throughput.floor) on that substrate;
2. the Celery peer (bench.celery_peer): 8 threads submit echo tasks and wait for results;
3. ``leasehold dev --endpoint <substrate> --provision`` with its default limits, as a new
   user starts it: 8 (then 64) HTTP clients of ONE tenant submit echo jobs to ``POST
   /jobs``, each retrying a 429 or 503 after its ``Retry-After`` as a real client does; the
   run lasts from the first submission to the last job's ``finished_at``. Every request the
   runtime makes meanwhile (API, workers, ticker, sweeper) is counted at the substrate, less
   the benchmark's own reads of the rows it waits for: AWS requests and transactions per job;
   The same jobs submitted with the library from 8 threads (no admission) are counted too;
4. 16 clients of one tenant submitting at :data:`PACED_SHARE` of the configured rate: every
   429 there is a refusal the tenant did not earn;
5. on DynamoDB Local only (the embedded emulator's are bench.timing's sections): queue wait
   at 50% of the API throughput just measured, delayed-job lateness, the idle runtime.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from http.client import HTTPConnection
from typing import Any
from urllib.parse import urlsplit

from bench import idle, request_cost, throughput, timing
from bench.local import Runtime, runtime, wait_succeeded
from bench.metering import Meter
from bench.substrate import Substrate, grew, started
from leasehold.core.spec import JobSpec
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.tenancy.admission import Limits

#: The paced run submits at this share of the tenant's configured rate (issue 21: "below 50%").
PACED_SHARE = 0.4
#: Operations of the jobs table's change stream, counted apart (see api_run).
STREAMS = "dynamodbstreams "
#: Worker processes of ``leasehold dev`` and of the Celery peer (threads each: 4).
WORKERS = 2


@dataclass(frozen=True, kw_only=True)
class Sizes:
    jobs: int = 200
    clients: tuple[int, ...] = (8, 64)
    paced_clients: int = 16
    paced_seconds: float = 10.0
    floor_jobs: int = 200
    celery: bool = True
    #: Calls per operation timed by bench.request_cost.
    cost_calls: int = 200
    #: DynamoDB Local only: queue wait and lateness seconds, delayed jobs, idle (settle, count).
    queue_wait_seconds: float = 20.0
    precision_seconds: float = 20.0
    delayed_jobs: int = 10
    delays: tuple[float, float] = (2.0, 8.0)
    idle: tuple[float, float] = (35.0, 30.0)  # settled as long as section 8's


@dataclass
class Submitted:
    ids: list[str]
    started: float
    seconds: float
    #: By status and message (``429 tenant <tenant> is submitting too fast``), and connection
    #: faults (``connection ConnectionResetError``), each followed by a resend.
    refusals: Counter[str]


class KeptClients:
    """The benchmark's HTTP clients: one keep-alive connection per thread, and what they met
    (refusals and connection faults, counted by kind)."""

    def __init__(self, api: str, *, timeout: float) -> None:
        self.url = urlsplit(api)
        self.timeout = timeout
        self.local = threading.local()
        self.opened: list[HTTPConnection] = []
        self.refusals: Counter[str] = Counter()
        self.lock = threading.Lock()

    def count(self, kind: str) -> None:
        with self.lock:
            self.refusals[kind] += 1

    def post(self, path: str, body: str, tenant: str) -> tuple[int, bytes, str | None]:
        """``POST`` ``body`` as ``tenant`` on this thread's connection: the status, the answer
        and its ``Retry-After``. A connection reset or closed before an answer (the gateway's
        listen backlog overflowed, or it closed a kept connection) is counted, and the request
        sent again on a new one, as a client would."""
        while True:
            connection = getattr(self.local, "connection", None)
            if connection is None:
                connection = self.local.connection = HTTPConnection(
                    self.url.hostname or "127.0.0.1", self.url.port, timeout=self.timeout)
                with self.lock:
                    self.opened.append(connection)
            try:
                connection.request("POST", path, body, headers={
                    "Content-Type": "application/json", "X-Leasehold-Tenant": tenant})
                response = connection.getresponse()
                return response.status, response.read(), response.getheader("Retry-After")
            except (ConnectionError, http.client.HTTPException) as exc:
                connection.close()
                self.count(f"connection {type(exc).__name__}")
                time.sleep(0.05)

    def close(self) -> None:
        for connection in self.opened:
            connection.close()


def submit_http(api: str, n: int, clients: int, tenant: str, *,
                rate: float | None = None) -> Submitted:
    """``n`` echo jobs from ``clients`` threads of one tenant, each with its own keep-alive
    connection; a 429 or 503 is retried after its ``Retry-After`` (the refusals are counted by
    status and message). With ``rate``, job ``i`` is sent no sooner than ``i / rate`` s in."""
    kept = KeptClients(api, timeout=60)
    start = time.time()

    def one(i: int) -> str:
        if rate:
            delay = start + i / rate - time.time()
            if delay > 0:
                time.sleep(delay)
        body = json.dumps({"task": "bench.echo", "payload": i})
        while True:
            status, answer, retry_after = kept.post("/jobs", body, tenant)
            if status in (200, 201):
                return str(json.loads(answer)["job_id"])
            if status not in (429, 503):
                raise RuntimeError(f"POST /jobs: {status} {answer[:200]!r}")
            kept.count(f"{status} {_message(answer)}")
            time.sleep(float(retry_after or 1))

    try:
        with ThreadPoolExecutor(clients) as pool:
            ids = list(pool.map(one, range(n)))
    finally:
        kept.close()
    return Submitted(ids, start, time.time() - start, kept.refusals)


def _message(answer: bytes) -> str:
    """A refusal's message with the tenant's name taken out (so refusals group)."""
    try:
        error = json.loads(answer).get("error") or {}
        text = f"{error.get('code', '')}: {error.get('message', '')}"
    except (ValueError, AttributeError):
        return answer[:80].decode(errors="replace")
    return " ".join("<tenant>" if word.startswith("'") else word for word in text.split())


def submit_library(app: Leasehold, n: int, clients: int, tenant: str) -> Submitted:
    """``n`` echo jobs submitted with the library (:func:`submit`, no admission) from
    ``clients`` threads of one tenant."""
    start = time.time()
    with ThreadPoolExecutor(clients) as pool:
        ids = list(pool.map(lambda i: submit(app, JobSpec(
            task="bench.echo", tenant=tenant, payload=i)).job.job_id, range(n)))
    return Submitted(ids, start, time.time() - start, Counter())


def api_run(rt: Runtime, substrate: Substrate, n: int, clients: int, *,
            rate: float | None = None, timeout: float = 300,
            library: bool = False) -> dict[str, Any]:
    """One tenant's ``n`` echo jobs through ``POST /jobs`` (``library``: through
    :func:`submit` in this process) from ``clients`` threads: jobs/s, refusals, and the
    substrate's requests per job (all of the runtime's, less the benchmark's own reads)."""
    app = rt.app()
    tenant = "f" + uuid.uuid4().hex[:10]
    before = substrate.counts()
    if library:
        sent = submit_library(app, n, clients, tenant)
    ours = Meter(app.clients, app.settings)  # our reads of the rows, taken out of the counts
    if not library:
        sent = submit_http(rt.api, n, clients, tenant, rate=rate)
    jobs = wait_succeeded(app, sent.ids, timeout=timeout, poll=1.0)
    requests = grew(before, substrate.counts())
    for op, count in ours.reset().requests.items():
        key = op.replace(".", " ", 1)
        requests[key] = requests.get(key, 0) - int(count)
    requests = {op: c for op, c in requests.items() if c > 0}
    # The change-stream relay's reads: on AWS Lambda's event source polls the stream, free
    # and not the application's requests; locally `leasehold dev`'s relay thread makes them.
    stream = {op: requests.pop(op) for op in list(requests) if op.startswith(STREAMS)}
    finished = max(j.finished_at or 0 for j in jobs) / 1000
    elapsed = finished - sent.started
    transactions = requests.get("dynamodb TransactWriteItems", 0)
    refused = sum(n for kind, n in sent.refusals.items() if kind.startswith("429"))
    return {
        "jobs": n, "clients": clients, "target_rate": rate,
        "via": "library" if library else "api",
        "seconds": round(elapsed, 3), "jobs_per_second": round(n / elapsed, 1),
        "submitted_per_second": round(n / sent.seconds, 1),
        "succeeded": sum(1 for j in jobs if j.state.value == "SUCCEEDED"),
        "refused": refused, "refused_share": round(refused / (refused + n), 3),
        "refusals": dict(sent.refusals.most_common()),
        "connection_faults": sum(n for kind, n in sent.refusals.items()
                                 if kind.startswith("connection")),
        "requests_per_job": round(sum(requests.values()) / n, 2),
        "transactions_per_job": round(transactions / n, 2),
        "requests_by_operation": {op: round(c / n, 3) for op, c in
                                  sorted(requests.items(), key=lambda kv: -kv[1])},
        "stream_reads_per_job": round(sum(stream.values()) / n, 3),
    }


def measure(name: str, sizes: Sizes, *,
            section: Callable[[str, Callable[[], Any]], Any] | None = None) -> dict[str, Any]:
    """Everything above on the substrate ``name``; ``section`` times each part (bench.run)."""
    def timed(label: str, body: Callable[[], Any]) -> Any:
        return section(f"{label} on {name}", body) if section else body()

    limits = Limits()
    out: dict[str, Any] = {"substrate": name, "limits": {"rate": limits.rate,
                                                         "burst": limits.burst},
                           "workers": WORKERS}
    with started(name) as substrate:
        out["request_cost_ms"] = timed("request costs", lambda: request_cost.measure(
            substrate.endpoint, calls=sizes.cost_calls))
        out["floor"] = timed("floor", lambda: throughput.floor(
            sizes.floor_jobs, endpoint=substrate.endpoint))
        if sizes.celery:
            from bench import celery_peer

            out["celery"] = timed("celery peer", lambda: celery_peer.measure(
                substrate, sizes.jobs, processes=WORKERS))
        with runtime(workers=WORKERS, endpoint=substrate.endpoint, limited=True) as rt:
            # Warm: the API's first request builds its app, and each worker's first job
            # connects it; neither belongs to the runs measured.
            warm = submit_http(rt.api, 2 * WORKERS, WORKERS, "warm" + uuid.uuid4().hex[:8])
            wait_succeeded(rt.app(), warm.ids, timeout=120, poll=0.2)
            out["api"] = [timed(f"front door x{clients}", partial(
                api_run, rt, substrate, sizes.jobs, clients)) for clients in sizes.clients]
            out["library"] = timed(f"library x{sizes.clients[0]}", lambda: api_run(
                rt, substrate, sizes.jobs, sizes.clients[0], library=True))
            rate = PACED_SHARE * limits.rate
            out["paced"] = timed("paced submissions", lambda: api_run(
                rt, substrate, max(1, int(rate * sizes.paced_seconds)), sizes.paced_clients,
                rate=rate))
            if name != "emulator":
                capacity = float(out["api"][0]["jobs_per_second"])
                out["queue_wait"] = timed("queue wait", lambda: {
                    **timing.queue_wait(rt, capacity / 2, sizes.queue_wait_seconds),
                    "capacity_jobs_per_second": capacity})
                out["precision"] = timed("precision", lambda: timing.precision(
                    rt, sizes.precision_seconds, sizes.delayed_jobs, sizes.delays))
    if name != "emulator":
        # On a fresh substrate, as section 8 measures the emulator's: one that has just
        # served every run above also holds their leftovers (issue 21: 6.13 requests/s
        # there, against 2.03 on a fresh one, in a run of 2026-11-24).
        with started(name) as fresh:
            out["idle"] = timed("idle runtime", lambda: idle.measure(
                workers=WORKERS, settle_seconds=sizes.idle[0], seconds=sizes.idle[1],
                pause_seconds=0.3, endpoint=fresh.endpoint))
    first = out["api"][0]
    costs = out["request_cost_ms"]
    out["substrate_ms_per_job"] = {
        "api": request_cost.per_job(costs, first["requests_by_operation"]),
        "library": request_cost.per_job(costs, out["library"]["requests_by_operation"]),
        **({"celery": request_cost.per_job(costs, out["celery"]["requests_by_operation"])}
           if "celery" in out else {})}
    out["ratios"] = {
        "api_to_floor": round(first["jobs_per_second"] / out["floor"]["jobs_per_second"], 3),
        **({"api_to_celery": round(first["jobs_per_second"]
                                   / out["celery"]["jobs_per_second"], 3)}
           if "celery" in out else {}),
    }
    return out
