"""Shared fixtures: moto-backed AWS, a fake clock, and factories for a Leasehold app."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator

import pytest
from moto import mock_aws

from leasehold.aws.clients import Clients
from leasehold.aws.provision import create_all
from leasehold.clock import FakeClock
from leasehold.compose import compose
from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold
from leasehold.settings import Settings


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "LEASEHOLD_TASKS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_REGION", "us-east-1")


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def registry() -> TaskRegistry:
    return TaskRegistry()


MakeApp = Callable[..., Leasehold]


@pytest.fixture
def make_app(aws: None, clock: FakeClock, registry: TaskRegistry) -> MakeApp:
    """Builds an app over fresh, uniquely named tables and queues in moto."""

    def make(**overrides: object) -> Leasehold:
        prefix = "t" + uuid.uuid4().hex[:8]
        values: dict[str, object] = {
            "jobs_table": f"{prefix}-jobs", "schedules_table": f"{prefix}-schedules",
            "tenants_table": f"{prefix}-tenants", "coordination_table": f"{prefix}-coord",
            "workflows_table": f"{prefix}-workflows",
            "queue_prefix": prefix, "shards": 4, "lease_seconds": 30.0,
            "pools": ("default",),
        }
        values.update(overrides)
        settings = Settings(**values)  # type: ignore[arg-type]
        clients = Clients(settings)
        create_all(clients, settings)
        return compose(settings, clock=clock, registry=registry,
                                       clients=clients, rng=random.Random(7))

    return make


@pytest.fixture
def app(make_app: MakeApp) -> Leasehold:
    return make_app()
