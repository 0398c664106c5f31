"""Durable execution (issue 23): what a step costs, and how soon a job resumes.

``per_step``: jobs of ``bench.steps`` with N steps against the same jobs with none, run by
the real worker on in-process moto with the :mod:`bench.metering` hooks; the difference per
step is its overhead. A step is one ``TransactWriteItems`` (the record's put and a
``ConditionCheck`` on the job row) plus its share of the one ``Query`` a resume reads the
records with. The meter does not model transactions, so their units are computed here from
the item sizes: AWS bills each item of a transactional write at 2 write units per KB, and we
count the ``ConditionCheck`` as one such item too (the conservative reading of the pricing).

``resume``: through a real ``leasehold dev``: the time from a sleep's end (the record's
``until``) to the lease that resumes it, and from a callback's completion over HTTP to the
lease that resumes its job (both from the job's own history, on the runtime's clock).
"""

from __future__ import annotations

import json
import statistics
import time
import urllib.request
import uuid
from datetime import datetime
from typing import Any

from moto import mock_aws

from bench.local import TASKS, Runtime, fake_credentials, runtime
from bench.metering import Meter, item_size, write_units
from leasehold.aws import provision
from leasehold.aws.definitions import job_key
from leasehold.clock import FakeClock, to_ms
from leasehold.compose import compose
from leasehold.core.registry import load_modules
from leasehold.core.spec import JobSpec
from leasehold.durable import records
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.worker import Delivery, Worker
from leasehold.settings import Settings

PRICES = {"dynamodb_write": 0.625, "dynamodb_read": 0.125, "sqs": 0.40}
#: The anchors' prices per million: Lambda durable functions' durable operations, Step
#: Functions standard state transitions.
ANCHORS = {"lambda_durable_functions_per_million_operations": 8.0,
           "step_functions_per_million_transitions": 25.0}


def _run(app: Any, worker: Worker, count: int, steps: int) -> Any:
    url = app.queues.url("default", "normal")
    jobs = [submit(app, JobSpec(task="bench.steps", payload=steps)).job for _ in range(count)]
    done = 0
    while done < count:
        for message in app.queues.receive(url, max_messages=10):
            worker.process(Delivery(message.body))
            app.queues.delete(url, [message.receipt_handle])
            done += 1
    return jobs


def per_step(*, steps: int = 10, jobs: int = 10) -> dict[str, Any]:
    fake_credentials()
    load_modules((TASKS,))
    with mock_aws():
        prefix = "d" + uuid.uuid4().hex[:6]
        settings = Settings(task_modules=(TASKS,), queue_prefix=prefix, **{
            f"{role}_table": f"{prefix}-{role}" for role in
            ("jobs", "schedules", "tenants", "coordination", "workflows")})
        app = compose(settings, clock=FakeClock())
        provision.create_all(app.clients, settings)
        meter = Meter(app.clients, settings)
        worker = Worker(app)
        meter.reset()
        _run(app, worker, jobs, 0)
        plain = meter.reset()
        stepped = _run(app, worker, jobs, steps)
        durable = meter.reset()
        extra = durable.minus(plain)
        # Transactional units: each step's record put and the job row's check, 2 per KB.
        units = 0
        for job in stepped:
            row = app.store.get(job.job_id)
            row_units = write_units(item_size(app.clients.dynamodb.get_item(
                TableName=settings.jobs_table, Key=job_key(job.job_id))["Item"]))
            for record in records.load(app, job.job_id).values():
                record_units = write_units(item_size(
                    {k: v for k, v in _av(record).items()}))
                units += 2 * record_units + 2 * row_units
            assert row.result == sum(range(steps))
        n = jobs * steps
        write_per_step = units / n
        read_per_step = extra.total_read_units() / n
        # (GetQueueUrl is cached per process: noise between the two runs, not a step's.)
        requests = sum(v for op, v in extra.requests.items() if op != "sqs.GetQueueUrl") / n
        dollars = 1e6 * (write_per_step * PRICES["dynamodb_write"] / 1e6
                         + read_per_step * PRICES["dynamodb_read"] / 1e6)
        return {
            "steps_per_job": steps, "jobs": jobs,
            "requests_per_step": round(requests, 3),
            "requests_by_operation": extra.per(n)["requests_by_operation"],
            "transactional_write_units_per_step": round(write_per_step, 2),
            "read_units_per_step": round(read_per_step, 3),
            "dollars_per_million_steps": round(dollars, 2),
            **ANCHORS,
        }


def _av(item: dict[str, Any]) -> dict[str, Any]:
    from leasehold.aws.dynamo import to_av
    return to_av(item)


def _get(rt: Runtime, path: str) -> dict[str, Any]:
    request = urllib.request.Request(rt.api + path, headers={"X-Leasehold-Tenant": "bench"})
    with urllib.request.urlopen(request, timeout=60) as response:
        reply: dict[str, Any] = json.loads(response.read())
    return reply


def _wait(rt: Runtime, ids: list[str], state: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    seen: dict[str, Any] = {}
    while len(seen) < len(ids):
        for job_id in ids:
            if job_id not in seen:
                job = _get(rt, f"/jobs/{job_id}")
                if job["state"] == state:
                    seen[job_id] = job
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(ids) - len(seen)} jobs never reached {state}")
        time.sleep(0.2)
    return seen


def _ms(iso: str) -> int:
    return to_ms(datetime.fromisoformat(iso.replace("Z", "+00:00")))


def _woken_at(job: dict[str, Any]) -> int:
    """When the lease after the (last) sleep took the job."""
    history = job["history"]
    last_sleep = max(i for i, h in enumerate(history) if h["to"] == "SLEEPING")
    return _ms(next(h["at"] for h in history[last_sleep + 1:] if h["to"] == "RUNNING"))


def _stats(values: list[float]) -> dict[str, Any]:
    values = sorted(values)
    p99 = values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]
    return {"count": len(values), "p50_s": round(statistics.median(values), 3),
            "p99_s": round(p99, 3), "max_s": round(values[-1], 3)}


def resume(rt: Runtime, *, count: int = 20, seconds: float = 3.0) -> dict[str, Any]:
    naps = [rt.post("/jobs", {"task": "bench.nap", "payload": seconds}, tenant="bench")["job_id"]
            for _ in range(count)]
    waits = [rt.post("/jobs", {"task": "bench.await"}, tenant="bench")["job_id"]
             for _ in range(count)]
    asleep = _wait(rt, waits, "SLEEPING")
    completed_at = {}
    for job_id, job in asleep.items():
        while not (job.get("progress") or {}).get("token"):
            time.sleep(0.1)
            job = _get(rt, f"/jobs/{job_id}")
        completed_at[job_id] = time.time() * 1000
        rt.post(f"/callbacks/{job['progress']['token']}", "go", tenant="bench")
    after_sleep = []
    for job_id, job in _wait(rt, naps, "SUCCEEDED").items():
        [until] = [s["until"] for s in _get(rt, f"/jobs/{job_id}/steps")["steps"]
                   if s["kind"] == "sleep"]
        after_sleep.append((_woken_at(job) - until) / 1000)
    after_callback = [(_woken_at(job) - completed_at[job_id]) / 1000
                      for job_id, job in _wait(rt, waits, "SUCCEEDED").items()]
    return {"sleep_seconds": seconds, "after_sleep": _stats(after_sleep),
            "after_callback": _stats(after_callback)}


def measure(*, steps: int, jobs: int, resumes: int) -> dict[str, Any]:
    """Both parts; ``resumes`` 0 skips the runtime (the test suite's tiny profile)."""
    result: dict[str, Any] = {"per_step": per_step(steps=steps, jobs=jobs)}
    if resumes:
        with runtime(workers=2, batch_size=1) as rt:
            result["resume"] = resume(rt, count=resumes)
    return result


def markdown(result: dict[str, Any] | None) -> list[str]:
    if not result:
        return []
    step, back = result["per_step"], result.get("resume")
    lines = [
        "", "## Durable execution (issue 23)", "",
        f"Per step ({step['jobs']} jobs of {step['steps_per_job']} steps against the same jobs "
        "with none; in-process moto, metered): "
        f"**{step['requests_per_step']} requests**, "
        f"**{step['transactional_write_units_per_step']} write units** (transactional: the "
        f"record and the job row's check), {step['read_units_per_step']} read units: "
        f"**${step['dollars_per_million_steps']} per million steps** in DynamoDB, against "
        "Lambda durable functions' ~$8 per million operations and Step Functions' $25 per "
        "million transitions (neither includes the compute).",
    ]
    if back:
        lines += ["", "Resume latency through `leasehold dev` (from a sleep's end, or a "
                      "callback's completion over HTTP, to the lease that resumes the job):",
                  "", "| after | jobs | p50 | p99 | max |", "| --- | --- | --- | --- | --- |"]
        for name in ("after_sleep", "after_callback"):
            s = back[name]
            lines.append(f"| {name.replace('_', ' ')} | {s['count']} | {s['p50_s']:.3f} s | "
                         f"{s['p99_s']:.3f} s | {s['max_s']:.3f} s |")
    return lines
