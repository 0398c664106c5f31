"""``leasehold dev`` runs outbound calls as deployed: it makes a targets role in its
emulator, and its worker processes sign and call AWS under a session of that role for each
job, never with their own credentials (issue 43)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import start_runtime
from tests.integration.target_server import Server, serve
from tests.unit.test_target_trust import SCAN_ATTACK


@pytest.fixture
def server() -> Iterator[Server]:
    yield from serve()


def test_dev_signs_and_calls_aws_as_the_job_s_session_of_its_targets_role(
        server: Server) -> None:
    runtime = start_runtime("--workers", "1", env={"LEASEHOLD_TARGETS": json.dumps({
        "http_sigv4": [{"url_prefix": f"{server.url}/prod/", "service": "execute-api"}],
        "aws_targets": [{"action": "sts:GetCallerIdentity", "resources": ["*"]}]})})
    try:
        banner = "".join(runtime.output)
        assert re.search(r"sigv4 and AWS targets run as arn:aws:iam::\d+:role/\S+-targets",
                         banner), banner
        signed = runtime.submit({"target": {"http": {
            "url": f"{server.url}/prod/orders", "method": "POST", "body": {"id": 1},
            "auth": {"sigv4": {"service": "execute-api"}}}}}, tenant="acme")
        who = runtime.submit({"target": {"aws": {"service": "sts",
                                                 "action": "GetCallerIdentity"}}},
                             tenant="acme")
        done = runtime.wait_for([signed["job_id"], who["job_id"]], tenant="acme")
        assert done[signed["job_id"]]["state"] == "SUCCEEDED", done
        assert done[who["job_id"]]["state"] == "SUCCEEDED", done
        [request] = server.requests
        key = re.search(r"Credential=([A-Z0-9]+)/", request.headers["Authorization"])
        assert key is not None and key[1].startswith("ASIA")  # STS's, not the worker's
        arn = done[who["job_id"]]["result"]["Arn"]
        assert re.fullmatch(r"arn:aws:sts::\d+:assumed-role/\S+-targets/lh\.acme@"
                            + who["job_id"], arn), arn
        refused = runtime.call("POST", "/jobs", {"target": {"http": SCAN_ATTACK}})
        assert refused.status == 422 and "target.http.auth.sigv4" in str(refused.body)
    finally:
        assert runtime.stop() == 0
