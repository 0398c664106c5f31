"""User flows over HTTP against the real runtime: idempotency, cancel, retry, redrive,
tenant isolation, bad input, and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT, Runtime

pytestmark = pytest.mark.e2e


def test_idempotent_submissions_make_one_job(runtime: Runtime) -> None:
    body = {"task": "echo", "payload": {"n": 1}, "idempotency_key": "e2e-once"}
    first = runtime.call("POST", "/jobs", body)
    second = runtime.call("POST", "/jobs", body)
    assert (first.status, second.status) == (201, 200)
    assert first.body["job_id"] == second.body["job_id"]
    done = runtime.wait_for([first.body["job_id"]])
    assert done[first.body["job_id"]]["result"] == {"n": 1}
    assert runtime.call("POST", "/jobs", {**body, "payload": 2}).status == 409


def test_cancel_stops_a_running_job_and_a_delayed_one(runtime: Runtime) -> None:
    running = runtime.submit({"task": "sleep", "payload": {"seconds": 30}})["job_id"]
    delayed = runtime.submit({"task": "echo", "delay_seconds": 600})["job_id"]
    runtime.wait_for([running], {"RUNNING"})
    assert runtime.call("DELETE", f"/jobs/{running}").status == 200
    assert runtime.call("DELETE", f"/jobs/{delayed}").body["state"] == "CANCELLED"
    done = runtime.wait_for([running], timeout=20)
    assert done[running]["state"] == "CANCELLED"
    assert runtime.call("DELETE", f"/jobs/{running}").status == 409


def test_retry_of_a_dead_job_runs_it_again(runtime: Runtime) -> None:
    job_id = runtime.submit({"task": "fail", "max_attempts": 1})["job_id"]
    assert runtime.wait_for([job_id])[job_id]["state"] == "DEAD"
    retried = runtime.call("POST", f"/jobs/{job_id}/retry")
    assert retried.status == 200 and retried.body["state"] == "QUEUED"
    job = runtime.wait_for([job_id])[job_id]
    assert job["state"] == "DEAD"
    assert [h["to"] for h in job["history"]].count("RUNNING") == 2
    assert any(h["reason"] == "manual retry" for h in job["history"])


def test_dead_letters_are_listed_and_redriven(runtime: Runtime) -> None:
    tenant = "dlq-owner"
    ids = [runtime.submit({"task": "fail", "max_attempts": 1}, tenant)["job_id"]
           for _ in range(2)]
    runtime.wait_for(ids, tenant=tenant)
    listed = runtime.call("GET", "/dead-letters", tenant=tenant).body["jobs"]
    assert sorted(j["job_id"] for j in listed) == sorted(ids)
    report = runtime.call("POST", "/dead-letters/redrive", {"pool": "default", "task": "fail"},
                          tenant=tenant).body
    assert sorted(report["redriven"]) == sorted(ids)
    for job in runtime.wait_for(ids, tenant=tenant).values():
        assert any(h["reason"] == "dead-letter redrive" for h in job["history"])


def test_tenants_never_see_each_others_jobs(runtime: Runtime) -> None:
    job_id = runtime.submit({"task": "echo"}, "alice")["job_id"]
    assert runtime.call("GET", f"/jobs/{job_id}", tenant="bob").status == 404
    assert runtime.call("DELETE", f"/jobs/{job_id}", tenant="bob").status == 404
    assert runtime.call("POST", f"/jobs/{job_id}/retry", tenant="bob").status == 404
    listed = runtime.call("GET", "/jobs?limit=200", tenant="bob").body["jobs"]
    assert job_id not in {j["job_id"] for j in listed}
    assert runtime.call("GET", f"/jobs/{job_id}", tenant="alice").status == 200


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"{nope", 400),
        (b'{"task": 7}', 422),
        (b'{"task": "nope"}', 422),
        (b'{"task": "ech\\u0001o"}', 422),
        (b'{"task": "echo", "priority": "asap"}', 422),
        (json.dumps({"task": "echo", "payload": "x" * 300_000}).encode(), 413),
    ],
)
def test_bad_input_gets_its_4xx_and_leaves_no_trace(runtime: Runtime, raw: bytes,
                                                    status: int) -> None:
    tenant = "bad-input"
    reply = runtime.call("POST", "/jobs", raw=raw, tenant=tenant)
    assert reply.status == status
    assert set(reply.body["error"]) == {"code", "message", "field"}
    assert runtime.call("GET", "/jobs", tenant=tenant).body["jobs"] == []
    assert runtime.call("GET", "/stats", tenant=tenant).body["live"] == 0  # no slot kept


def test_the_cli_submits_waits_and_lists(runtime: Runtime) -> None:
    cli = [sys.executable, "-m", "leasehold.cli"]
    done = subprocess.run([*cli, "submit", "echo", '{"via": "cli"}', "--wait", "--json",
                           "--url", runtime.url, "--tenant", "cli"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout)
    assert job["state"] == "SUCCEEDED" and job["result"] == {"via": "cli"}
    listed = subprocess.run([*cli, "list", "--url", runtime.url, "--tenant", "cli"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert job["job_id"] in listed.stdout and "SUCCEEDED" in listed.stdout
    status = subprocess.run([*cli, "status", job["job_id"], "--url", runtime.url,
                             "--tenant", "other"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert status.returncode == 1 and "404" in status.stderr


def test_a_second_runtime_on_a_busy_port_says_so(runtime: Runtime) -> None:
    port = runtime.url.rsplit(":", 1)[1]
    second = subprocess.run([sys.executable, "-m", "leasehold.cli", "dev", "--port", port],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert second.returncode == 2
    assert f"port {port}" in second.stderr and "already in use" in second.stderr
