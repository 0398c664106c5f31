"""GET /jobs searches by label, created-time range, error type or message prefix and id
prefix, within the caller's tenant only (issue 25)."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.errors import NonRetryableError
from leasehold.lifecycle.app import Leasehold

from .api_client import ApiClient
from .helpers import deliver


@pytest.fixture
def api(app: Leasehold, registry: TaskRegistry) -> ApiClient:
    @registry.task("work", max_attempts=1)
    def work(payload: Any, ctx: Any) -> Any:
        if payload == "timeout":
            raise TimeoutError("upstream took 30 s")
        if payload == "bad":
            raise NonRetryableError("bad input: missing field")
        return payload

    return ApiClient(app)


def ids(reply: Any) -> list[str]:
    assert reply.status == 200, reply.body
    return [job["job_id"] for job in reply.body["jobs"]]


def test_search_filters_combine_and_stay_in_the_tenant(api: ApiClient, clock: FakeClock
                                                       ) -> None:
    def submit(payload: str, tenant: str = "acme", **labels: str) -> str:
        reply = api.post("/jobs", {"task": "work", "payload": payload, "labels": labels},
                         tenant=tenant)
        assert reply.status == 201, reply.body
        job_id: str = reply.body["job_id"]
        clock.advance(60)
        return job_id

    early = submit("timeout", env="prod")  # 00:00
    prod_bad = submit("bad", env="prod", team="a")  # 00:01
    staging = submit("timeout", env="staging")  # 00:02
    late = submit("timeout", env="prod")  # 00:03
    other = submit("timeout", tenant="rival", env="prod")
    deliver(api.app)
    assert ids(api.get("/jobs?label=env:prod", tenant="acme")) == [late, prod_bad, early]
    assert ids(api.get("/jobs?label=env:prod&label=team:a", tenant="acme")) == [prod_bad]
    assert ids(api.get("/jobs?error_type=TimeoutError&label=env:prod", tenant="acme")) == [
        late, early]
    assert ids(api.get("/jobs?error_type=OSError", tenant="acme")) == [
        late, staging, early]  # a base class of TimeoutError matches
    assert ids(api.get("/jobs?error_prefix=bad%20input", tenant="acme")) == [prod_bad]
    window = "created_after=2026-01-01T00:01:00Z&created_before=2026-01-01T00:03:00Z"
    assert ids(api.get(f"/jobs?{window}", tenant="acme")) == [staging, prod_bad]
    assert ids(api.get(f"/jobs?id_prefix={late[:20]}", tenant="acme")) == [late]
    assert ids(api.get("/jobs?label=env:prod", tenant="rival")) == [other]
    assert api.get("/jobs?label=envprod", tenant="acme").status == 422
    assert api.get("/jobs?created_after=2026-01-01T00:01:00", tenant="acme").status == 422
