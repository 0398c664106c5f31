"""Throughput of no-op jobs end to end, and the floor: the bare moto calls a job needs."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http.client import HTTPConnection
from typing import Any
from urllib.parse import urlsplit

from bench.local import Runtime, fake_credentials, wait_succeeded
from leasehold.aws.clients import Clients
from leasehold.aws.definitions import JOBS, job_key
from leasehold.core.ids import new_job_id
from leasehold.core.spec import JobSpec
from leasehold.lifecycle.submission import submit
from leasehold.local import emulator
from leasehold.settings import Settings

#: Client threads that submit (library or HTTP) and that drive the floor.
CLIENT_THREADS = 8


def _measure(runtime: Runtime, n: int, submit_one: Callable[[str], str], *,
             timeout: float) -> dict[str, Any]:
    app = runtime.app()
    tenant = "t" + uuid.uuid4().hex[:10]
    started = time.time()
    with ThreadPoolExecutor(CLIENT_THREADS) as pool:
        ids = list(pool.map(lambda _: submit_one(tenant), range(n)))
    submitted = time.time()
    # Polled once a second (the end time comes from the rows, so polling only adds load).
    jobs = wait_succeeded(app, ids, timeout=timeout, poll=1.0)
    finished = max(j.finished_at or 0 for j in jobs) / 1000
    elapsed = finished - started
    return {
        "jobs": n, "seconds": round(elapsed, 3), "jobs_per_second": round(n / elapsed, 1),
        "submitted_per_second": round(n / (submitted - started), 1),
        "succeeded": sum(1 for j in jobs if j.state.value == "SUCCEEDED"),
    }


def library(runtime: Runtime, n: int, *, timeout: float = 300) -> dict[str, Any]:
    """Submit ``n`` no-op jobs with :func:`leasehold.lifecycle.submission.submit` from 8 threads."""
    app = runtime.app()

    def one(tenant: str) -> str:
        return submit(app, JobSpec(task="bench.noop", tenant=tenant)).job.job_id

    return _measure(runtime, n, one, timeout=timeout)


def http(runtime: Runtime, n: int, *, timeout: float = 300) -> dict[str, Any]:
    """Submit ``n`` no-op jobs with ``POST /jobs`` from 8 clients at once: each thread keeps
    its own keep-alive connection, as 8 real clients would (the gateway answers them
    concurrently), and is its own tenant: 8 concurrent submitters of ONE tenant contend on
    its token bucket item, and a submission that loses that race 5 times is answered 429
    (see tenancy/admission.py), which would measure the bucket, not the gateway."""
    url = urlsplit(runtime.api)
    local = threading.local()
    opened: list[HTTPConnection] = []

    def one(tenant: str) -> str:
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = HTTPConnection(
                url.hostname or "127.0.0.1", url.port, timeout=60)
            opened.append(connection)
            local.tenant = f"{tenant}-{len(opened)}-{threading.get_ident()}"
        connection.request("POST", "/jobs", json.dumps({"task": "bench.noop"}), headers={
            "Content-Type": "application/json", "X-Leasehold-Tenant": local.tenant})
        response = connection.getresponse()
        body = response.read()
        if response.status not in (200, 201):
            raise RuntimeError(f"POST /jobs: {response.status} {body[:200]!r}")
        return str(json.loads(body)["job_id"])

    try:
        return _measure(runtime, n, one, timeout=timeout)
    finally:
        for connection in opened:
            connection.close()


# -- the floor ---------------------------------------------------------------------------------

def floor(n: int, *, threads: int = CLIENT_THREADS, endpoint: str | None = None
          ) -> dict[str, Any]:
    """``n`` jobs' worth of the bare calls a job minimally needs, on a fresh emulator (or on
    the substrate at ``endpoint``: bench.front_door's, which holds nothing else yet).

    Per job: one conditional put, one send, two conditional updates; per 10 jobs: one receive
    and one batched delete. Items carry the same index keys a job row does (so moto maintains
    the same indexes), on a table built from the same definition.
    """
    fake_credentials()
    server = emulator.start() if endpoint is None else None
    try:
        settings = Settings(endpoint_url=server.endpoint if server else endpoint,
                            jobs_table="floor-jobs")
        clients = Clients(settings)
        ddb, sqs = clients.dynamodb, clients.sqs
        ddb.create_table(**JOBS.create_table_kwargs(settings))
        urls = [sqs.create_queue(QueueName=f"floor-{i}")["QueueUrl"] for i in range(threads)]
        shares = [n // threads + (1 if i < n % threads else 0) for i in range(threads)]
        calls = {"put": 0, "send": 0, "receive": 0, "update": 0, "delete_batch": 0}
        lock = threading.Lock()

        def drive(url: str, count: int) -> None:
            local = dict.fromkeys(calls, 0)
            done = 0
            while done < count:
                size = min(10, count - done)
                for _ in range(size):
                    now = int(time.time() * 1000)
                    job_id = new_job_id(now, "floor", settings.tenant_shards)
                    ddb.put_item(
                        TableName="floor-jobs",
                        Item={**job_key(job_id), "state": {"S": "QUEUED"},
                              "epoch": {"N": "1"}, "tenant": {"S": "floor"},
                              "created_at": {"N": str(now)}, "sweep_shard": {"N": "0"},
                              "sweep_at": {"N": str(now + 25_000)},
                              "lease_expires_at": {"N": str(now + 900_000)}},
                        ConditionExpression="attribute_not_exists(job_id)")
                    sqs.send_message(QueueUrl=url, MessageBody=json.dumps(
                        {"job_id": job_id, "epoch": 1}))
                    local["put"] += 1
                    local["send"] += 1
                messages: list[Any] = []
                while len(messages) < size:
                    messages += sqs.receive_message(
                        QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
                    local["receive"] += 1
                for message in messages:
                    job_id = json.loads(message["Body"])["job_id"]
                    now = int(time.time() * 1000)
                    ddb.update_item(
                        TableName="floor-jobs", Key=job_key(job_id),
                        UpdateExpression="SET #s = :running, lease_expires_at = :exp",
                        ConditionExpression="#s = :queued AND epoch = :one",
                        ExpressionAttributeNames={"#s": "state"},
                        ExpressionAttributeValues={
                            ":running": {"S": "RUNNING"}, ":queued": {"S": "QUEUED"},
                            ":one": {"N": "1"}, ":exp": {"N": str(now + 30_000)}})
                    ddb.update_item(
                        TableName="floor-jobs", Key=job_key(job_id),
                        UpdateExpression=("SET #s = :ok "
                                          "REMOVE sweep_shard, sweep_at, lease_expires_at"),
                        ConditionExpression="#s = :running AND epoch = :one",
                        ExpressionAttributeNames={"#s": "state"},
                        ExpressionAttributeValues={
                            ":running": {"S": "RUNNING"}, ":ok": {"S": "SUCCEEDED"},
                            ":one": {"N": "1"}})
                    local["update"] += 2
                sqs.delete_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(messages)])
                local["delete_batch"] += 1
                done += len(messages)
            with lock:
                for name, value in local.items():
                    calls[name] += value

        started = time.monotonic()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(drive, urls, shares))
        elapsed = time.monotonic() - started
    finally:
        if server is not None:
            server.stop()
    return {"jobs": n, "seconds": round(elapsed, 3), "jobs_per_second": round(n / elapsed, 1),
            "client_threads": threads, "calls": calls}
