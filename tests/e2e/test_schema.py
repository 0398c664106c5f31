"""Schemathesis against the running API: its OpenAPI document is the contract (issue 30).

The real ``st run`` against ``leasehold dev``, every operation, with the checks: no server
error, status codes, content types, response bodies and headers as documented, and data the
schema refuses refused. Its stateful phase follows the document's links (a schedule, trigger,
workflow or job created, then read, changed, deleted; a job's open callback completed).
``LEASEHOLD_SCHEMA_SECONDS`` (the stateless phases), ``LEASEHOLD_SCHEMA_STATEFUL_SECONDS`` and
``LEASEHOLD_SCHEMA_EXAMPLES`` set the budget (``make soak`` gives a larger one).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote

import pytest

from .conftest import ROOT, Runtime

pytestmark = pytest.mark.e2e

CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,"
          "response_schema_conformance,response_headers_conformance,negative_data_rejection")
CONFIG = ROOT / "tests" / "e2e" / "schemathesis.toml"
DOCUMENT = json.loads((ROOT / "docs" / "openapi.json").read_text())
TENANT = "schemathesis"
OPERATIONS = sum(len(methods) for methods in DOCUMENT["paths"].values())


def open_callback(runtime: Runtime) -> str:
    """A real open callback's token, once an ``await-callback`` job waits on it."""
    job = runtime.submit({"task": "await-callback"}, tenant=TENANT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        steps = runtime.call("GET", f"/jobs/{job['job_id']}/steps", tenant=TENANT).body["steps"]
        if steps and "token" in steps[0]:
            return str(steps[0]["token"])
        time.sleep(0.2)
    raise AssertionError(f"job {job['job_id']} opened no callback: {runtime.job(job['job_id'])}")


def schemathesis(runtime: Runtime, phases: str, seconds: str, examples: str
                 ) -> tuple[str, set[int]]:
    """``st run`` of ``phases`` against the runtime: its output and the statuses the real
    callback it was given answered, or a failure showing the output.

    Its configuration is :data:`CONFIG` with the callback routes given a real open
    callback's token: a token is a secret no generator can guess, and a job's steps only
    show it once the job has run (too late for most of the stateful phase's links).
    """
    token = open_callback(runtime)
    with tempfile.TemporaryDirectory(prefix="leasehold-st-") as scratch:
        config = Path(scratch) / "schemathesis.toml"
        config.write_text(CONFIG.read_text() + (
            "\n[[operations]]\ninclude-path-regex = \"^/callbacks/\"\n"
            f"parameters = {{ \"path.token\" = \"{token}\" }}\n"))
        run = subprocess.run(
            [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "--no-color",
             "run", f"{runtime.url}/openapi.json", "--checks", CHECKS, "--phases", phases,
             "--max-time", seconds, "--max-examples", examples, "--seed", "30",
             # One worker: two threads parsing source at once can trip CPython 3.11's
             # "AST constructor recursion depth mismatch" inside Hypothesis (a runtime
             # error of the run, not of the API; seen once in ten runs).
             "--workers", "1", "--header", f"X-Leasehold-Tenant: {TENANT}",
             "--report", "har", "--report-har-path", str(Path(scratch) / "run.har"),
             "--generation-database", "none",
             "--request-timeout", "30"],
            cwd=scratch, capture_output=True, text=True, timeout=int(seconds) * 4 + 120)
        har = json.loads((Path(scratch) / "run.har").read_text())
    out = run.stdout + run.stderr
    # What the callback routes answered when given the real token (all statuses are
    # checked by Schemathesis; here: that the run did reach the real callback).
    answered = {entry["response"]["status"] for entry in har["log"]["entries"]
                if token in unquote(entry["request"]["url"])}
    print(out)  # shown with -s
    assert run.returncode == 0, out[-12000:]
    return out, answered


def test_every_operation_answers_as_its_document_says(runtime: Runtime) -> None:
    out, answered = schemathesis(runtime, "examples,coverage,fuzzing",
                       os.environ.get("LEASEHOLD_SCHEMA_SECONDS", "40"),
                       os.environ.get("LEASEHOLD_SCHEMA_EXAMPLES", "8"))
    tested = re.search(r"Tested: (\d+)", out)
    assert tested and int(tested.group(1)) == OPERATIONS, out[-3000:]
    # It reached the real callback: completed (or failed) it, or found it done.
    assert 200 in answered, answered


def test_the_documents_links_lead_to_real_schedules_workflows_and_callbacks(
        runtime: Runtime) -> None:
    out, _ = schemathesis(runtime, "stateful",
                       os.environ.get("LEASEHOLD_SCHEMA_STATEFUL_SECONDS", "30"),
                       os.environ.get("LEASEHOLD_SCHEMA_EXAMPLES", "8"))
    links = re.search(r"API Links:\s+(\d+) covered", out)
    assert links and int(links.group(1)) > 0, out[-6000:]
