"""`leasehold dev --endpoint URL`: a fresh emulator, or no credentials, stops the start, named.

Before, the runtime started anyway and answered 500 to every request.
"""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import pytest

from leasehold.aws.provision import NotProvisioned, missing
from leasehold.local.options import RuntimeOptions
from leasehold.local.runtime import Runtime


def _options(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             **changes: object) -> tuple[RuntimeOptions, str]:
    prefix = "d" + uuid.uuid4().hex[:8]  # fresh names: nothing exists yet
    for role in ("JOBS", "SCHEDULES", "TENANTS", "COORDINATION", "WORKFLOWS"):
        monkeypatch.setenv(f"LEASEHOLD_{role}_TABLE", f"{prefix}-{role.lower()}")
    monkeypatch.setenv("LEASEHOLD_QUEUE_PREFIX", prefix)
    monkeypatch.delenv("LEASEHOLD_PROVISION", raising=False)
    options = RuntimeOptions(endpoint=endpoint, port=0, workers=0,
                             event_log=str(tmp_path / "events.jsonl"))
    for name, value in changes.items():
        setattr(options, name, value)
    return options, prefix


def test_a_fresh_endpoint_without_provision_stops_the_start_naming_what_is_missing(
        endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options, prefix = _options(endpoint, tmp_path, monkeypatch)
    runtime = Runtime(options, out=io.StringIO())
    try:
        with pytest.raises(NotProvisioned) as refused:
            runtime.start()
    finally:
        runtime.stop()
    message = str(refused.value)
    for name in (f"table {prefix}-jobs", f"table {prefix}-workflows",
                 f"queue {prefix}-default-high", f"queue {prefix}-default-low-dlq"):
        assert name in message
    assert "--provision" in message
    assert not runtime.children  # no worker was started


def test_provision_creates_what_is_missing_and_the_runtime_starts(
        endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options, _ = _options(endpoint, tmp_path, monkeypatch, provision=True)
    runtime = Runtime(options, out=io.StringIO())
    try:
        runtime.start()
        assert runtime.app is not None
        assert missing(runtime.app.clients, runtime.app.settings) == []
    finally:
        runtime.stop()


def test_no_credentials_stops_the_start_naming_them(
        endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options, _ = _options(endpoint, tmp_path, monkeypatch)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    runtime = Runtime(options, out=io.StringIO())
    try:
        with pytest.raises(NotProvisioned, match="AWS_ACCESS_KEY_ID"):
            runtime.start()
    finally:
        runtime.stop()
