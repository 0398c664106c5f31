"""``leasehold dev`` publishes job events from the jobs table's change stream (issue 24):
workers die right after their batches commit (an injected crash at the delete that follows
the finish), and every job that SUCCEEDED still has its event, with one ``event_id`` per
committed change however often it was relayed. (The loss this closes, a worker killed
between its commit and its PutEvents to a bus, is reproduced against the inline publisher
in ``tests/integration/test_stream_events.py``; here the bus is the local log.)"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from .conftest import start_runtime

pytestmark = pytest.mark.e2e

JOBS = 20


def test_workers_killed_after_their_commits_lose_no_event(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    runtime = start_runtime("--workers", "2", env={
        "LEASEHOLD_EVENT_BUS": f"file:{log}", "LEASEHOLD_PUBLISH": "terminal",
        # Every worker process dies at its first delete, right after its first batch committed.
        "LEASEHOLD_FAULTS": "sqs.DeleteMessageBatch:crash:1:x1",
        "LEASEHOLD_FAULTS_SEED": "5", "LEASEHOLD_HANDOFF_SECONDS": "5"})
    try:
        ids = [runtime.submit({"task": "echo", "payload": i})["job_id"] for i in range(JOBS)]
        done = runtime.wait_for(ids, timeout=120)
        assert {job["state"] for job in done.values()} == {"SUCCEEDED"}
        deadline = time.monotonic() + 15  # the relay's passes back off to 5 s when idle
        while True:
            events = [json.loads(line) for line in log.read_text().splitlines()
                      if '"leasehold.job"' in line]
            succeeded = Counter(e["detail"]["job_id"] for e in events
                                if e["detail-type"] == "Job Succeeded")
            crashes = sum(1 for line in runtime.output if "restarted" in line)
            if (set(succeeded) == set(ids) and crashes) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        assert runtime.stop() == 0, "".join(runtime.output[-30:])
    print(f"\n{JOBS} jobs, {crashes} worker(s) killed after a commit, "
          f"{sum(succeeded.values())} 'Job Succeeded' events for {len(succeeded)} jobs")
    assert crashes > 0  # the fault really killed workers between commit and delete
    assert set(succeeded) == set(ids)
    # A repeat is the same change: one id, one (job, epoch, state); two changes, two ids.
    changes = {}
    for event in events:
        detail = event["detail"]
        assert detail["event_id"].startswith(detail["job_id"] + ":")
        change = (detail["job_id"], detail["epoch"], detail["state"])
        assert changes.setdefault(detail["event_id"], change) == change
    assert len(set(changes.values())) == len(changes)
