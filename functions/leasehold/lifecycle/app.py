"""The application context: one object that holds the settings, clock, store, queues and tasks.

It is built bare here; :func:`leasehold.compose.compose` builds it with every feature that
observes the store (tenant counters, workflows, job state events) installed. Features hook in
from above (store observers, sweeper repairs) so that this layer never imports them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

from leasehold.aws.clients import Clients
from leasehold.aws.queues import Queues
from leasehold.clock import Clock, SystemClock
from leasehold.core.registry import TaskRegistry, default_registry, load_modules
from leasehold.errors import Fenced, Misdirected
from leasehold.lifecycle.store import DynamoJobStore, JobStore
from leasehold.settings import Settings


@dataclass
class Leasehold:
    settings: Settings
    clients: Clients
    store: JobStore
    queues: Queues
    registry: TaskRegistry
    clock: Clock = field(default_factory=SystemClock)
    rng: random.Random = field(default_factory=random.Random)
    #: Repair passes the sweeper runs after re-driving leases: name -> pass(app, now), which
    #: returns how many things it repaired. Features above the lifecycle register them.
    repairs: dict[str, Callable[[Leasehold, int], int]] = field(default_factory=dict)
    #: Scopes a feature opens around one multi-job operation (a worker's batch of records, a
    #: ticker or sweeper pass), to do once at its end what it would do per job: job state
    #: events are sent in PutEvents calls of up to 10 entries when the batch ends.
    batches: list[Callable[[], AbstractContextManager[Any]]] = field(default_factory=list)
    #: Features that take part in a submission (``leasehold.lifecycle.submission.Intake``):
    #: each may add writes to the creating transaction, or answer with another job.
    intakes: list[Callable[..., Any]] = field(default_factory=list)
    #: Called with (app, the row as it is, now) when a worker's lease was refused and the
    #: row is still QUEUED at the message's epoch (a start window that passed).
    refused_leases: list[Callable[[Leasehold, Any, int], None]] = field(default_factory=list)
    #: Called by the sweeper with (app, job, now) on each QUEUED job past its hand-off
    #: deadline, before it re-sends it; True when the hook ended the job.
    sweep_hooks: list[Callable[[Leasehold, Any, int], bool]] = field(default_factory=list)
    #: Called by the worker for every attempt it starts, before the handler runs: (the
    #: handler's context, the job as leased, the lease owner). Durable execution installs
    #: its per-attempt provider on the context here.
    attempt_hooks: list[Callable[[Any, Any, str], None]] = field(default_factory=list)
    #: Features that equip each attempt's JobContext (``ctx.once``), called as (app, ctx).
    contexts: list[Callable[[Leasehold, Any], None]] = field(default_factory=list)
    #: Why a finished row may not be deleted (``leasehold.lifecycle.deletion``): name ->
    #: guard(app, jobs) answering ``{job_id: why}`` for the jobs a feature still references
    #: (a workflow's step, a live durable parent's child). A guard that cannot read raises:
    #: nothing is deleted then.
    deletion_guards: dict[str, Callable[[Leasehold, Sequence[Any]], dict[str, str]]] = \
        field(default_factory=dict)
    #: What features do when a finished job is re-run by hand (``control.requeue``: API,
    #: CLI, console, admission, dead-letter redrive, bulk retry; a workflow retry's re-run
    #: step): called as (app, the job as it is, now), each returns row attributes to set in
    #: the re-run's own fenced write, so what it records is never lost apart from the
    #: re-run. Durable execution numbers the job's runs here (its waits re-arm per run).
    restarts: list[Callable[[Leasehold, Any, int], Mapping[str, Any]]] = field(
        default_factory=list)
    #: Row attributes features add to every new job, whatever made it (``new_job``: the
    #: API, the client, ``enqueue_item``, schedules, triggers, workflows, ``ctx.spawn``),
    #: called as (app, the row about to be written). Tracing records the job's trace parent.
    stamps: list[Callable[[Leasehold, Any], Mapping[str, Any]]] = field(default_factory=list)
    #: Scopes a worker opens around each attempt it leased, from the lease to the recorded
    #: outcome, called as (app, the job as leased, the delivery); each yields a callable
    #: told how the attempt ended: (the outcome's value, the handler's exception or None).
    #: The handler runs in a copy of the worker thread's context variables, so what a scope
    #: makes current (tracing's run span) is current in task code.
    attempt_scopes: list[Callable[[Leasehold, Any, Any],
                                  AbstractContextManager[Callable[[str, BaseException | None],
                                                                  None]]]] = field(
        default_factory=list)
    #: Scopes opened around each durable step that runs (not one answered from its record),
    #: called as (app, the job, the step's name); the step's exception passes through them.
    step_scopes: list[Callable[[Leasehold, Any, str], AbstractContextManager[Any]]] = field(
        default_factory=list)
    #: Row attributes set in the write that suspends a job (``ctx.sleep``, a callback, its
    #: children), called as (app, the job as it runs): tracing links the resumed attempt to
    #: the one that suspended.
    suspensions: list[Callable[[Leasehold, Any], Mapping[str, Any]]] = field(
        default_factory=list)
    #: What features keep per job outside its row, removed when the row is gone (its
    #: retention TTL, ``DELETE /jobs/{id}``, a bulk delete): called by the change-stream
    #: relay as (app, the ids of the rows its batch saw removed, in stream order) before the
    #: batch is acknowledged. Each must be idempotent (a batch is read again after any
    #: failure) and raise when it could not finish (then the batch is read again).
    removals: list[Callable[[Leasehold, Sequence[str]], None]] = field(default_factory=list)
    #: Asked, as (app, now), before a worker takes a lease and before it records an
    #: attempt's outcome; one that raises stops it there (nothing is written, the message
    #: comes back after its visibility timeout). Cells (``leasehold.cells``) refuse while
    #: this cell does not hold its Region lease. Each must answer from memory: it is on
    #: every job's path.
    work_guards: list[Callable[[Leasehold, int], None]] = field(default_factory=list)

    #: Asked, as (app, tenant, now), before new work of a tenant is accepted from outside
    #: (the API's submissions, workflows, schedules, triggers and events; a schedule's or a
    #: trigger's firing); one that raises refuses it. Cells refuse tenants homed in another
    #: Region (``Misdirected``, 421) and all while fenced. Work a job makes (``ctx.spawn``,
    #: a workflow's next step) is not asked: it belongs where its parent runs.
    front_doors: list[Callable[[Leasehold, str, int], None]] = field(default_factory=list)

    #: Measurements features report, as (name, value, unit: a CloudWatch unit such as
    #: "Count" or "Milliseconds"): the Lambda handlers feed them to the metrics the
    #: stack's alarms watch (cells: ``RegionLeaseAgeMs``, ``MisdirectedSubmissions``).
    measures: list[Callable[[str, float, str], None]] = field(default_factory=list)

    def measure(self, name: str, value: float, unit: str = "Count") -> None:
        for sink in self.measures:
            sink(name, value, unit)

    def admit_tenant(self, tenant: str, now: int) -> None:
        """Raise if a feature refuses new work of ``tenant`` here now."""
        for door in self.front_doors:
            door(self, tenant, now)

    def homed_here(self, tenant: str, now: int) -> bool:
        """Whether the schedules and triggers held here may fire ``tenant``'s work now:
        False where a front door refuses it as misdirected (homed in another cell) or
        fenced (this cell without its Region lease)."""
        try:
            self.admit_tenant(tenant, now)
        except (Misdirected, Fenced):
            return False
        return True

    def guard_work(self, now: int) -> None:
        """Raise if a feature forbids this process to lease or finish jobs now."""
        for guard in self.work_guards:
            guard(self, now)

    @classmethod
    def from_settings(
        cls,
        settings: Settings | None = None,
        *,
        clock: Clock | None = None,
        registry: TaskRegistry | None = None,
        clients: Clients | None = None,
        rng: random.Random | None = None,
    ) -> Leasehold:
        settings = settings or Settings.from_env()
        clients = clients or Clients(settings)
        registry = registry if registry is not None else default_registry
        load_modules(settings.task_modules)
        return cls(
            settings=settings,
            clients=clients,
            store=DynamoJobStore(clients, settings, observers=[]),
            queues=Queues(clients, settings),
            registry=registry,
            clock=clock or SystemClock(),
            rng=rng or random.Random(),
        )

    def now(self) -> int:
        return self.clock.now_ms()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One multi-job operation: what features defer within it is done when it ends
        (also when it raises), before its caller reports anything done."""
        with ExitStack() as stack:
            for scope in self.batches:
                stack.enter_context(scope())
            yield
