"""A flooding tenant gets 429 with Retry-After while another tenant's jobs run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .conftest import Runtime, start_runtime

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def limited() -> Iterator[Runtime]:
    started = start_runtime("--workers", "1", "--concurrency", "2",
                            env={"LEASEHOLD_TENANT_RATE": "2", "LEASEHOLD_TENANT_BURST": "10"})
    yield started
    assert started.stop() == 0


def test_a_flooding_tenant_is_throttled_and_another_is_not(limited: Runtime) -> None:
    replies = [limited.call("POST", "/jobs", {"task": "echo", "payload": i}, tenant="flood")
               for i in range(30)]
    statuses = [r.status for r in replies]
    assert statuses.count(201) >= 10 and statuses.count(429) >= 15
    throttled = next(r for r in replies if r.status == 429)
    assert int(throttled.headers["Retry-After"]) >= 1
    assert throttled.body["error"]["code"] == "rate_limited"
    calm = [limited.submit({"task": "echo", "payload": i}, "calm")["job_id"] for i in range(5)]
    done = limited.wait_for(calm, tenant="calm")
    assert {job["state"] for job in done.values()} == {"SUCCEEDED"}
    accepted = [r.body["job_id"] for r in replies if r.status == 201]
    assert {j["state"] for j in limited.wait_for(accepted, tenant="flood").values()} == \
        {"SUCCEEDED"}
