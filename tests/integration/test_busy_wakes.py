"""A busy API does not keep the backed-off ticker and sweeper at their base pace (issue 21).

Every accepted write used to wake both loops, so while jobs were being submitted they
queried every shard at their base pace (about 3 queries per job). A job submission needs
neither soon; other writes (a schedule, a cancel) still wake them.
"""

from __future__ import annotations

import json

from leasehold.api.context import ApiConfig
from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold
from leasehold.local.gateway import proxy_event
from leasehold.local.options import RuntimeOptions
from leasehold.local.runtime import Runtime


def _runtime(app: Leasehold) -> Runtime:
    runtime = Runtime(RuntimeOptions())
    runtime.app = app
    runtime.api_config = ApiConfig(trust_tenant_header=True)
    return runtime


def _post(runtime: Runtime, path: str, body: object) -> int:
    reply = runtime._answer(proxy_event("POST", path, {"Content-Type": "application/json"},
                                        json.dumps(body)))
    return int(reply["statusCode"])


def test_job_submissions_do_not_wake_the_ticker_or_the_sweeper(
        app: Leasehold, registry: TaskRegistry) -> None:
    registry.task("echo")(lambda payload, ctx: payload)
    runtime = _runtime(app)
    for body in ({"task": "echo"}, {"task": "echo", "delay_seconds": 5},
                 {"task": "echo", "run_at": "2099-01-01T00:00:00Z"}):
        assert _post(runtime, "/jobs", body) in (201, 422)
    assert not runtime.tick_wake.is_set() and not runtime.sweep_wake.is_set()
    assert _post(runtime, "/schedules", {"cron": "rate(1 minute)", "task": "echo"}) == 201
    assert runtime.tick_wake.is_set() and runtime.sweep_wake.is_set()
