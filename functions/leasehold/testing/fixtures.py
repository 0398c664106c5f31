"""pytest fixtures for applications: ``pytest_plugins = ["leasehold.testing.fixtures"]`` in
your ``conftest.py``, then ask for ``leasehold`` (and ``clock``)::

    def test_welcome_mail(leasehold):
        job = send_email.submit({"to": "a@example.com"})     # the default client: in-process
        assert job.result(timeout=5) == {"sent": True}

    def test_the_reminder_goes_an_hour_later(leasehold, clock):
        job = send_email.submit({"to": "a@example.com"}, delay_seconds=3600)
        clock.advance(3599)
        assert job.status() == "QUEUED"
        clock.advance(1)                                       # or leasehold.advance(1)
        assert job.status() == "SUCCEEDED"

For the length of the test ``leasehold.advance(seconds)`` moves the scheduler's clock, and
every ``Client()`` built without a URL (and ``task.submit``) reaches the in-process scheduler.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from leasehold import clock as clocks
from leasehold.client import set_default_client, set_default_transport
from leasehold.testing.clock import TestClock
from leasehold.testing.local import LocalLeasehold


@pytest.fixture
def leasehold(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalLeasehold]:
    """An in-process Leasehold over moto with every ``@task`` registered so far, on a test
    clock; ``task.submit``, every ``Client()`` built without a URL and
    ``leasehold.advance`` reach it for the test."""
    try:
        from moto import mock_aws
    except ImportError as missing:
        raise RuntimeError("the leasehold fixture runs over moto, which this Python lacks: "
                           "pip install 'leasehold[local]'") from missing

    for name in ("AWS_ENDPOINT_URL", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", "us-east-1"), ("AWS_REGION", "us-east-1")):
        monkeypatch.setenv(name, value)
    with mock_aws():
        local = LocalLeasehold()
        set_default_client(local.client)
        set_default_transport(local.client.transport, local.client.url)
        clocks.use_test_clock(local.advance)
        try:
            yield local
        finally:
            clocks.use_test_clock(None)
            set_default_transport(None)
            set_default_client(None)
            local.close()


@pytest.fixture
def clock(leasehold: LocalLeasehold) -> TestClock:
    """The in-process scheduler's clock: ``clock.advance(seconds)``, ``clock.now()``."""
    return leasehold.clock
