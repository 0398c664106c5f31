"""The composition root: one object that holds the settings, clock, store, queues and tasks."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from leasehold.aws.clients import Clients
from leasehold.aws.queues import Queues
from leasehold.clock import Clock, SystemClock
from leasehold.core.registry import TaskRegistry, default_registry, load_modules
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
        store = DynamoJobStore(clients, settings, observers=[])
        app = cls(
            settings=settings,
            clients=clients,
            store=store,
            queues=Queues(clients, settings),
            registry=registry,
            clock=clock or SystemClock(),
            rng=rng or random.Random(),
        )
        # Per-tenant live-job and per-state counters (back-pressure and /stats).
        from leasehold.tenancy.admission import count_transition

        store.observers.append(count_transition(app))
        # Workflows: a step that finishes counts itself on its dependents and releases them.
        from leasehold.workflows.progress import install as install_workflows

        install_workflows(app)
        # Job state events: to EventBridge, or a local log (``event_bus="file:<path>"``).
        from leasehold.events.publishing import install as install_events

        install_events(app)
        return app

    def now(self) -> int:
        return self.clock.now_ms()
