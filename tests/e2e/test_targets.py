"""Jobs with no code through ``leasehold dev`` (its API, its worker processes): a target
reaches a server on this machine, since dev allows loopback and its banner says so, and
only loopback: the metadata address is still a 422."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.conftest import Runtime
from tests.integration.target_server import Server, serve


@pytest.fixture
def server() -> Iterator[Server]:
    yield from serve()


def test_a_target_job_runs_in_dev_against_a_local_server_and_ssrf_stays_shut(
        runtime: Runtime, server: Server) -> None:
    assert any("targets:" in line and "loopback" in line for line in runtime.output)
    server.answers = [(503, {"Retry-After": "1"}, b"busy")]
    job = runtime.submit({"target": {"http": {"url": f"{server.url}/e2e", "method": "POST",
                                              "body": {"from": "dev"}}}})
    done = runtime.wait_for([job["job_id"]])[job["job_id"]]
    assert done["state"] == "SUCCEEDED", done
    assert done["result"]["body"] == {"ok": True}
    first, second = server.requests
    assert second.at - first.at >= 1.0  # the Retry-After, honoured by another process
    refused = runtime.call("POST", "/jobs",
                           {"target": {"http": {"url": "http://169.254.169.254/latest/"}}})
    assert refused.status == 422 and "link-local" in str(refused.body)
