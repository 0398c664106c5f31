"""The composition root: one object that holds the settings, clock, store, queues and tasks."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from leasehold.aws import Clients
from leasehold.clock import Clock, SystemClock
from leasehold.queues import Queues
from leasehold.registry import TaskRegistry, default_registry, load_modules
from leasehold.settings import Settings
from leasehold.store import DynamoJobStore, JobStore


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
