"""Fixtures the integration tests share beyond the root conftest."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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
