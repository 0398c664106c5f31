"""Workflows in the real local runtime over HTTP: a diamond and a 100-wide fan-out/fan-in."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import ROOT, Runtime, start_runtime

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def runtime() -> Iterator[Runtime]:
    started = start_runtime("--workers", "2", "--concurrency", "4",
                            "--tasks", "examples.tasks,examples.workflow_tasks")
    yield started
    assert started.stop() == 0, "".join(started.output[-30:])


def wait_workflow(runtime: Runtime, workflow_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        reply = runtime.call("GET", f"/workflows/{workflow_id}")
        assert reply.status == 200, reply.body
        if reply.body["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            body: dict[str, Any] = reply.body
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"workflow still {reply.body['state']}: {reply.body['counts']}")
        time.sleep(0.5)


def results(runtime: Runtime, workflow: dict[str, Any], *steps: str) -> dict[str, Any]:
    by_id = {s["id"]: s["job_id"] for s in workflow["steps"]}
    return {step: runtime.job(by_id[step])["result"] for step in steps}


def test_a_diamond_passes_results_from_both_branches_to_the_join(runtime: Runtime) -> None:
    reply = runtime.call("POST", "/workflows", {"name": "diamond", "steps": [
        {"id": "a", "task": "add-inputs", "payload": 1},
        {"id": "b", "task": "add-inputs", "payload": 10, "depends_on": ["a"]},
        {"id": "c", "task": "add-inputs", "payload": 100, "depends_on": ["a"]},
        {"id": "d", "task": "add-inputs", "depends_on": ["b", "c"]},
    ]})
    assert reply.status == 201, reply.body
    done = wait_workflow(runtime, reply.body["workflow_id"])
    assert done["state"] == "SUCCEEDED"
    assert results(runtime, done, "a", "b", "c", "d") == {"a": 1, "b": 11, "c": 101, "d": 112}


def test_a_hundred_wide_fan_out_fans_in_once(runtime: Runtime) -> None:
    width = 100
    steps: list[dict[str, Any]] = [{"id": "split", "task": "add-inputs"}]
    steps += [{"id": f"part-{i}", "task": "add-inputs", "payload": i, "depends_on": ["split"]}
              for i in range(width)]
    steps.append({"id": "join", "task": "add-inputs",
                  "depends_on": [f"part-{i}" for i in range(width)]})
    reply = runtime.call("POST", "/workflows", {"name": "fan", "steps": steps})
    assert reply.status == 201, reply.body
    done = wait_workflow(runtime, reply.body["workflow_id"], timeout=240)
    assert done["state"] == "SUCCEEDED" and done["counts"] == {"SUCCEEDED": width + 2}
    join = next(s for s in done["steps"] if s["id"] == "join")
    assert join["attempts"] == 1
    assert results(runtime, done, "join") == {"join": sum(range(width))}


def test_the_cli_submits_shows_the_tree_and_cancels(runtime: Runtime, tmp_path: Any) -> None:
    spec = tmp_path / "wf.json"
    spec.write_text(json.dumps({"name": "cli", "steps": [
        {"id": "wait", "task": "sleep", "payload": {"seconds": 30}},
        {"id": "after", "task": "echo", "depends_on": ["wait"]}]}))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "leasehold.cli", "workflow", *args,
                               "--url", runtime.url], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)

    submitted = cli("submit", str(spec), "--json")
    assert submitted.returncode == 0, submitted.stderr
    workflow_id = json.loads(submitted.stdout)["workflow_id"]
    status = cli("status", workflow_id)
    assert f"cli {workflow_id}  RUNNING" in status.stdout
    assert "└── wait  " in status.stdout and "after  WAITING" in status.stdout
    cancelled = cli("cancel", workflow_id)
    assert cancelled.returncode == 0 and "CANCELLED" in cancelled.stdout.splitlines()[0]
    done = wait_workflow(runtime, workflow_id)
    assert done["state"] == "CANCELLED"
    listing = cli("list", "--state", "CANCELLED")
    assert workflow_id in listing.stdout
