"""``leasehold dev --regions a,b`` and ``leasehold regions isolate`` (issue 48): a user's drill
on one machine. Two cells, each a whole runtime on its own emulator, share a control table;
Region ``a`` is taken off while it runs (every AWS call of its cell refused at the botocore
layer, its API answering 503), failed over to ``b``, brought back and failed back. On both
DynamoDB substrates: the embedded emulator, and AWS's DynamoDB Local (one per cell)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from .conftest import FAST, ROOT, Runtime

pytestmark = pytest.mark.e2e

#: A short Region lease, so the isolated cell fences itself within the test (the cache must
#: stay under half of it).
CELL_ENV = {"LEASEHOLD_REGION_LEASE_SECONDS": "9", "LEASEHOLD_CONTROL_CACHE_SECONDS": "1",
            "LEASEHOLD_SKEW_GRACE_SECONDS": "1"}


def leasehold(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "leasehold.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "LEASEHOLD_STATE_DIR": str(state)})


@pytest.fixture(params=["emulator", "local"])
def cells(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Runtime, Runtime,
                                                                          Path]]:
    state = tmp_path / "state"
    process = subprocess.Popen(
        [sys.executable, "-m", "leasehold.cli", "dev", "--regions", "a,b", "--port", "0",
         "--workers", "1", "--concurrency", "2", "--in-memory", "--state-dir", str(state),
         "--dynamodb", request.param, *FAST],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, **CELL_ENV})
    output: list[str] = []
    assert process.stdout is not None
    for line in process.stdout:
        output.append(line)
        if line.startswith("Press Ctrl-C") and "in Regions" in "".join(output):
            break
    threading.Thread(target=lambda: output.extend(process.stdout or ()), daemon=True).start()
    if request.param == "local":  # each cell said which DynamoDB it runs on
        said = [line for line in output if "DynamoDB: AWS's DynamoDB Local" in line]
        assert sorted(line[:4] for line in said) == ["[a] ", "[b] "], "".join(output)
    urls = json.loads((state / "regions.json").read_text())["urls"]
    a, b = Runtime(process, url=urls["a"]), Runtime(process, url=urls["b"])
    yield a, b, state
    assert a.stop() == 0, "".join(output[-40:])
    assert not (state / "regions.json").exists()


def test_a_region_isolated_while_it_runs_is_failed_over_and_runs_its_jobs_once_when_back(
        cells: tuple[Runtime, Runtime, Path]) -> None:
    a, b, state = cells
    # acme's first submission homes it in a. a's worker works now, so it holds a fresh
    # Region lease of its own when a goes off: only the isolation itself (every AWS call
    # refused) keeps it from the job due next.
    warm = a.submit({"task": "echo", "payload": {"n": 0}}, tenant="acme")["job_id"]
    assert a.wait_for([warm], tenant="acme")[warm]["state"] == "SUCCEEDED"
    misdirected = b.call("POST", "/jobs", {"task": "echo", "payload": {}}, tenant="acme")
    assert misdirected.status == 421
    assert misdirected.body["error"]["home_url"] == a.url
    # Acknowledged in a, due in 4 s: a is isolated before then.
    submitted_at = time.time()
    waiting = a.submit({"task": "echo", "payload": {"n": 1}, "delay_seconds": 4},
                       tenant="acme")
    isolated = leasehold("regions", "isolate", "a", state=state)
    assert isolated.returncode == 0, isolated.stderr
    isolated_at = time.time()
    # The precondition: a went off before the job's time (else it may have started there).
    assert isolated_at < submitted_at + 4, "the isolation came too late to test anything"
    refused = a.call("POST", "/jobs", {"task": "echo", "payload": {}}, tenant="acme")
    assert refused.status == 503
    assert refused.body["error"]["code"] == "region_isolated"

    # Every Region's cell is listed, b's too, which no tenant calls home yet.
    shown = leasehold("regions", "show", "--json", state=state)
    assert shown.returncode == 0, shown.stderr
    assert {r["region"]: r["state"] for r in json.loads(shown.stdout)["regions"]} == \
        {"a": "active", "b": "active"}
    over = leasehold("regions", "failover", "--from", "a", "--to", "b", "--json", state=state)
    assert over.returncode == 0, over.stderr
    assert [m["tenant"] for m in json.loads(over.stdout)["moved"]] == ["acme"]
    declared = time.monotonic()
    while True:  # the new home accepts acme's work once its cache of acme's home expires
        moved = b.call("POST", "/jobs", {"task": "echo", "payload": {"n": 2}}, tenant="acme")
        if moved.status == 201 or time.monotonic() - declared > 120:
            break
        time.sleep(0.2)
    assert moved.status == 201, moved.body
    assert time.monotonic() - declared <= 120
    assert b.wait_for([moved.body["job_id"]], tenant="acme")[moved.body["job_id"]][
        "state"] == "SUCCEEDED"

    # Past the waiting job's time and past a's Region lease, a still off: nothing ran there.
    while time.time() < isolated_at + 11:
        time.sleep(0.5)
    back = leasehold("regions", "reconnect", "a", state=state)
    assert back.returncode == 0, back.stderr
    reconnected_at = time.time()
    failback = leasehold("regions", "failback", "--region", "a", state=state)
    assert failback.returncode == 0, failback.stderr

    done = a.wait_for([waiting["job_id"]], tenant="acme")[waiting["job_id"]]
    assert done["state"] == "SUCCEEDED"
    assert done["attempts"] == 1
    started = datetime.fromisoformat(done["started_at"].replace("Z", "+00:00")).timestamp()
    assert started >= reconnected_at - 0.5, "the job ran while its Region was isolated"
