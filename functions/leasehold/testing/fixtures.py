"""pytest fixtures for applications: ``pytest_plugins = ["leasehold.testing.fixtures"]`` in
your ``conftest.py``, then ask for ``leasehold``::

    def test_welcome_mail(leasehold):
        job = send_email.submit({"to": "a@example.com"})     # the default client: in-process
        assert job.result(timeout=5) == {"sent": True}
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from leasehold.client import set_default_client
from leasehold.testing.local import LocalLeasehold


@pytest.fixture
def leasehold(monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalLeasehold]:
    """An in-process Leasehold over moto with every ``@task`` registered so far; the default
    client (``task.submit``) points at it for the test."""
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
        try:
            yield local
        finally:
            set_default_client(None)
