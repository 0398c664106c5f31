"""Drive jobs through the real queues and worker, one step at a time."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import event

from leasehold.aws.clients import Clients
from leasehold.aws.dynamo import to_av
from leasehold.aws.faults import Fault, FaultInjector
from leasehold.aws.provision import create_all
from leasehold.aws.queues import Received
from leasehold.clock import Clock
from leasehold.compose import compose
from leasehold.core.jobs import Job, JobError
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.consumer import consume
from leasehold.lifecycle.submission import COUNTED, Submitted, submit
from leasehold.lifecycle.worker import Worker
from leasehold.settings import PRIORITIES, Settings
from leasehold.tenancy.admission import Gcra, Limits, submit_admitted
from leasehold.tenancy.counters import slot_item


def submit_swept(app: Leasehold, spec: JobSpec) -> Submitted:
    """Submit ``spec`` the way a batch does: the row first, with its ``sweep`` entry (the
    outbox the sweeper reads), and its message after it. A single plain submission sends
    first and writes no entry (issue 46); the sweeper's own tests need a row it can find."""
    pending: list[handoff.Pending] = []
    submitted = submit(app, spec, handoffs=pending)
    handoff.send_all(app.queues, pending)
    return submitted


def receive_all(app: Leasehold, pool: str = "default") -> list[Received]:
    messages: list[Received] = []
    for priority in PRIORITIES:
        url = app.queues.url(pool, priority)
        while batch := app.queues.receive(url, max_messages=10):
            messages += batch
    return messages


def deliver(app: Leasehold, worker: Worker | None = None, pool: str = "default",
            *, once: bool = False) -> int:
    """Receive and process visible messages as Lambda batches; returns how many.

    ``once``: one receive per queue, so a retry sent meanwhile waits for the next call.
    """
    worker = worker or Worker(app)
    count = 0
    for priority in PRIORITIES:
        url = app.queues.url(pool, priority)
        while batch := app.queues.receive(url, max_messages=10):
            consume(worker, batch)
            count += len(batch)
            if once:
                break
    return count


def dlq_bodies(app: Leasehold, pool: str = "default", priority: str = "normal") -> list[str]:
    url = app.queues.dlq_url(pool, priority)
    return [m.body for m in app.queues.receive(url, max_messages=10)]


def inject(app: Leasehold, *faults: Fault, seed: int = 0) -> FaultInjector:
    """Install ``faults`` on the app's DynamoDB and SQS clients (the calls still reach moto)."""
    injector = FaultInjector(list(faults), seed=seed)
    injector.install(app.clients.dynamodb)
    injector.install(app.clients.sqs)
    return injector


def lost_past_retries(app: Leasehold, target: str) -> FaultInjector:
    """The next ``target`` call lands and its caller sees an error past botocore's retries."""
    return inject(app, Fault(target=target, kind="lose-raise"))


def tenant_live(app: Leasehold, tenant: str = "default", shards: int = 8) -> int:
    """The tenant's live-job counter as admission sees it, summed over its admission shards."""
    total = 0
    for shard in range(shards):
        item = app.clients.dynamodb.get_item(
            TableName=app.settings.tenants_table,
            Key={"tenant": {"S": slot_item(tenant, shard)}}, ConsistentRead=True)
        total += int(item.get("Item", {}).get("live", {"N": "0"})["N"])
    return total


def live_counted_jobs(app: Leasehold, tenant: str = "default") -> int:
    """The tenant's jobs that hold a live slot, counted from the table itself."""
    jobs = app.store.batch_get([
        item["job_id"]["S"] for item in app.clients.dynamodb.scan(
            TableName=app.settings.jobs_table, ProjectionExpression="job_id")["Items"]])
    return sum(1 for job in jobs if job.tenant == tenant and job.state.live
               and job.extra.get(COUNTED))


def timed_calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[float]:
    """When each call of ``module.name`` began (monotonic seconds): the real function, timed."""
    seen: list[float] = []
    real: Callable[..., Any] = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        seen.append(time.monotonic())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return seen


class TenantItemWrites:
    """Every UpdateItem the app makes on the tenants table, by item key: the tenants'
    counters (``figures=False``) or the per-task figures (``figures=True``, :mod:`leasehold.
    metrics`), which share the table."""

    def __init__(self, app: Leasehold, *, figures: bool) -> None:
        self.items: list[str] = []
        self.table = app.settings.tenants_table
        self.figures = figures
        app.clients.dynamodb.meta.events.register(
            "before-parameter-build.dynamodb.UpdateItem", self._seen)

    def _seen(self, params: dict[str, Any], **_: Any) -> None:
        if params.get("TableName") != self.table:
            return
        key = params["Key"]["tenant"]["S"]
        if ("#task" in key) is self.figures:
            self.items.append(key)


def submit_as_a_caller(app: Leasehold, spec: JobSpec, what: str,
                       errors: tuple[type[BaseException], ...] = (Exception,)) -> Job | None:
    """Submit ``spec`` as a caller does under the state machine's faults: a submission that
    failed with one of ``errors`` is sent again with its idempotency key, three tries in all.
    The job, or None if every try failed (each failure is a hypothesis event)."""
    for _ in range(3):
        try:
            return submit(app, spec).job
        except errors:
            event(f"a {what} submission failed")
    return None


def submit_on_a_stale_admission_item(app: Leasehold, tenant: str = "acme",
                                     spec: JobSpec | None = None,
                                     client: Any | None = None) -> Submitted:
    """A capped submission whose tenant's admission item fell behind, unknown to this
    process (as after a restart): the first transaction is refused, and admission catches up
    and writes again as a new row under a new id (issue 44's phantom event and span).
    ``spec`` (an ``echo`` job by default) names ``tenant``, a tenant with no admission item
    yet; ``client`` writes the stale item (the app's own by default)."""
    limits = Limits(shards=1)
    behind = app.now() - int(Gcra.of(limits).lag) - 60_000
    (client or app.clients.dynamodb).put_item(TableName=app.settings.tenants_table,
                                              Item=to_av({"tenant": tenant, "tat": behind}))
    made = submit_admitted(app, spec or JobSpec(task="echo", tenant=tenant), "default", limits,
                           buckets={})
    assert made.created
    return made


def whole_error(app: Leasehold, job: Job) -> JobError:
    """``job``'s last error whole: the row keeps an excerpt of its message (issue 46), the
    whole message and traceback are the kept item the job view reads."""
    from leasehold.lifecycle.tracebacks import full_error

    error = full_error(app, job)
    assert error is not None, f"job {job.job_id} has no error"
    return error


def server_app(endpoint: str, registry: TaskRegistry, clock: Clock | None = None) -> Leasehold:
    """An app over tables and queues of its own (a fresh prefix) on the moto server at
    ``endpoint``: what threads that share one server's atomicity need."""
    prefix = "c" + uuid.uuid4().hex[:8]
    settings = Settings(
        endpoint_url=endpoint, jobs_table=f"{prefix}-jobs", schedules_table=f"{prefix}-sch",
        tenants_table=f"{prefix}-ten", coordination_table=f"{prefix}-co",
        workflows_table=f"{prefix}-wf", queue_prefix=prefix, pools=("default",))
    clients = Clients(settings)
    create_all(clients, settings)
    return compose(settings, registry=registry, clients=clients, clock=clock)
