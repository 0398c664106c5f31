"""A flooding tenant gets 429 with Retry-After while another tenant's jobs run."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pytest

from .conftest import Reply, Runtime, start_runtime

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def limited() -> Iterator[Runtime]:
    started = start_runtime("--workers", "1", "--concurrency", "2",
                            env={"LEASEHOLD_TENANT_RATE": "2", "LEASEHOLD_TENANT_BURST": "10"})
    yield started
    assert started.stop() == 0


def test_a_flooding_tenant_is_throttled_and_another_is_not(limited: Runtime) -> None:
    # The flood goes on until it has been refused 15 times, however slowly this machine
    # sends it; what it got through is then bounded by the clock it took, measured around it:
    # its burst at once (10), one per interval after (2/s), and at most half a burst more
    # (the limiter's documented lag, leasehold.tenancy.gcra). A missing or a loose limit
    # admits more than that; the burst itself must pass.
    replies: list[Reply] = []
    began = time.monotonic()
    while sum(r.status == 429 for r in replies) < 15:
        assert len(replies) < 400, "the flooding tenant was never throttled"
        replies.append(limited.call("POST", "/jobs", {"task": "echo", "payload": len(replies)},
                                    tenant="flood"))
    elapsed = time.monotonic() - began
    statuses = [r.status for r in replies]
    assert set(statuses) == {201, 429}, statuses
    assert statuses[:10] == [201] * 10  # the burst
    assert statuses.count(201) <= 10 + 5 + math.ceil(2 * elapsed), (statuses, elapsed)
    throttled = next(r for r in replies if r.status == 429)
    assert int(throttled.headers["Retry-After"]) >= 1
    assert throttled.body["error"]["code"] == "rate_limited"
    calm = [limited.submit({"task": "echo", "payload": i}, "calm")["job_id"] for i in range(5)]
    done = limited.wait_for(calm, tenant="calm")
    assert {job["state"] for job in done.values()} == {"SUCCEEDED"}
    accepted = [r.body["job_id"] for r in replies if r.status == 201]
    assert {j["state"] for j in limited.wait_for(accepted, tenant="flood").values()} == \
        {"SUCCEEDED"}
