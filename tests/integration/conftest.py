"""Fixtures the integration tests share beyond the root conftest."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from leasehold.core.context import JobContext
from leasehold.core.registry import TaskRegistry
from leasehold.local import emulator


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """A real moto server process for the module's tests; stopped (and gone) after them."""
    server = emulator.start()
    try:
        yield server.endpoint
    finally:
        server.stop()
    assert server.process.poll() is not None


@pytest.fixture
def runs(registry: TaskRegistry) -> Counter[str]:
    """How many times each job ran the ``echo`` task, registered here on the test's
    registry (a module with a ``runs`` fixture of its own overrides this one)."""
    counted: Counter[str] = Counter()

    @registry.task("echo")
    def echo(payload: Any, ctx: JobContext) -> Any:
        counted[ctx.job_id] += 1
        return payload

    return counted
