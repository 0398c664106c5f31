"""Workflow schedules over the API (the handler driven with API Gateway proxy events)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import ModuleType

import pytest

from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.lifecycle.app import Leasehold
from leasehold.time.ticker import tick
from tests.integration.api_client import ApiClient
from tests.integration.helpers import deliver

STEPS = [
    {"id": "extract", "task": "ok"},
    {"id": "load", "task": "ok", "depends_on": ["extract"], "failure_policy": "ignore"},
]


@pytest.fixture
def api(app: Leasehold, registry: TaskRegistry) -> ApiClient:
    registry.task("ok", priority="high")(lambda payload, ctx: payload)
    return ApiClient(app)


def test_a_workflow_schedule_round_trips_and_its_runs_name_it(
        api: ApiClient, clock: FakeClock) -> None:
    created = api.post("/schedules", {"cron": "* * * * *", "name": "etl",
                                      "workflow": {"name": "etl", "steps": STEPS}},
                       tenant="acme")
    assert created.status == 201, created.body
    sid = created.body["schedule_id"]
    shown = api.get(f"/schedules/{sid}", tenant="acme").body
    assert shown == created.body
    assert shown["task"] is None and shown["workflow"]["name"] == "etl"
    extract, load = shown["workflow"]["steps"]
    # Defaults resolved when the schedule was written (the task's priority, the pool).
    assert (extract["priority"], extract["pool"], load["depends_on"],
            load["failure_policy"]) == ("high", "default", ["extract"], "ignore")
    # What GET shows is a body POST /workflows accepts.
    replayed = api.post("/workflows", shown["workflow"], tenant="acme")
    assert replayed.status == 201, replayed.body

    clock.advance(60)
    tick(api.app)
    listed = api.get("/workflows", tenant="acme").body["workflows"]
    [run] = [w for w in listed if w["schedule_id"] == sid]
    assert run["scheduled_for"] == "2026-01-01T00:01:00.000Z"
    assert api.get(f"/schedules/{sid}", tenant="acme").body["last_workflow_id"] == \
        run["workflow_id"]
    while deliver(api.app):
        pass
    detail = api.get(f"/workflows/{run['workflow_id']}", tenant="acme").body
    assert (detail["state"], detail["schedule_id"]) == ("SUCCEEDED", sid)

    triggered = api.post(f"/schedules/{sid}/trigger", tenant="acme")
    assert triggered.status == 201 and triggered.body["schedule_id"] == sid
    assert [s["id"] for s in triggered.body["steps"]] == ["extract", "load"]
    patched = api.call("PATCH", f"/schedules/{sid}", {"task": "ok", "payload": {"v": 1}},
                       tenant="acme")
    assert patched.status == 200 and patched.body["workflow"] is None
    assert patched.body["task"] == "ok"


def test_an_invalid_workflow_schedule_is_a_422_naming_the_field(api: ApiClient) -> None:
    for body, field in [
        ({"task": "ok", "workflow": {"steps": STEPS}}, "workflow"),
        ({"workflow": {"steps": [{"id": "a", "task": "ok", "depends_on": ["a"]}]}},
         "workflow.steps[0].depends_on"),
        ({"workflow": {"steps": [{"id": "a", "task": "missing"}]}}, "workflow.steps[0].task"),
    ]:
        reply = api.post("/schedules", {"cron": "@daily", **body}, tenant="acme")
        assert (reply.status, reply.body["error"]["field"]) == (422, field), reply.body
    assert api.get("/schedules", tenant="acme").body["schedules"] == []


def test_the_cli_reads_the_workflow_from_a_file(tmp_path: Path) -> None:
    from leasehold.cli import schedules as cli

    path = tmp_path / "etl.json"
    path.write_text(json.dumps({"steps": STEPS}))
    parser = _parser(cli)
    args = parser.parse_args(["schedules", "create", "--cron", "@daily",
                              "--workflow", str(path)])
    assert cli._body(args) == {"cron": "@daily", "workflow": {"steps": STEPS}}


def _parser(cli: ModuleType) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    return parser
