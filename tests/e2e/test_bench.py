"""The benchmark suite runs end to end (tiny sizes) and writes a complete report.

Timings are never asserted: this proves the benchmark works, not how fast anything is.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

pytestmark = pytest.mark.e2e

#: The tiny run takes about 1 minute of CPU, and on a machine loaded 15 deep over 5 minutes
#: of wall (it starts several runtimes and emulators): a limit that catches a hang, not a
#: slow machine (the run was cut at 240 s under load).
RUN_LIMIT = 600


@pytest.mark.timeout(RUN_LIMIT + 60)
def test_tiny_benchmark_run_writes_every_section_and_the_targets_table(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEHOLD_")}
    # Its own process group: the run starts runtimes of its own, and a run cut at the limit
    # must not leave them working (a timed-out run once left one busy for two hours).
    run = subprocess.Popen(
        [sys.executable, "-m", "bench.run", "--profile", "tiny", "--out", str(tmp_path)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        _, stderr = run.communicate(timeout=RUN_LIMIT)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    assert run.returncode == 0, stderr[-3000:]

    results = json.loads((tmp_path / "results.json").read_text())
    assert results["machine"]["cores"] >= 1
    assert len(results["load"]["at_end"]) == 3
    client = results["client_result"]  # Client.submit(...).result(), one job at a time
    assert client["jobs"] == 3 and 0 < client["p50_s"] <= client["p99_s"]
    assert client["requests_per_job"] >= 2  # the submit and at least one long poll

    for kind in ("immediate", "immediate_via_api", "delayed", "retried", "cron_occurrence"):
        measured = results["per_job"][kind]
        assert measured["requests"] > 0
        operations = measured["requests_by_operation"]
        # The row: a put, or (API-admitted) a transaction with the tenant's slot.
        assert operations.get("dynamodb.PutItem", 0) + \
            operations.get("dynamodb.TransactWriteItems", 0) >= 1
        assert measured["requests_by_operation"]["sqs.SendMessage"] >= 1
        assert measured["write_units"] >= 1
        assert any(key.endswith(" jobs") for key in measured["dynamodb_requests_by_table"])
    retried, immediate = results["per_job"]["retried"], results["per_job"]["immediate"]
    assert retried["requests"] > immediate["requests"]  # a second attempt costs more

    (run,) = results["throughput"]["runs"]
    assert run["library"]["succeeded"] == run["library"]["jobs"]
    assert run["http"]["succeeded"] == run["http"]["jobs"]
    assert results["throughput"]["floor"]["jobs_per_second"] > 0
    assert results["queue_wait"]["count"] >= 1
    assert results["precision"]["delayed"]["count"] >= 1
    fair = results["fairness"]
    assert fair["quiet_alone"]["count"] >= 1 and fair["quiet_with_noisy"]["count"] >= 1
    assert fair["noisy"]["attempted"] == sum(fair["noisy"][k] for k in (
        "admitted", "refused", "overloaded", "errors"))

    (stored,) = results["scaling"]["stored"]
    assert stored["ticker"]["promoted"] == 10 and stored["sweeper"]["recovered"] == 10
    assert stored["ticker"]["read_units"] > 0 and stored["sweeper"]["read_units"] > 0
    assert results["scaling"]["submission_by_shards"][0]["submitted_per_second"] > 0
    # The sweep index: a plain job is sent first and never enters it (issue 46; SQS's
    # visibility timeout brings back a job whose worker died), however long it runs.
    (short,) = results["sweep_index"]
    assert (short["heartbeats"], short["index_write_units"]) == (0, 0)
    assert results["scaling"]["one_tenant"][-1]["jobs_per_second"] >= 10_000
    assert "10,000 jobs/s" in (tmp_path / "capacity.md").read_text()

    assert results["cold_start"]["imports"]["wall_ms"]["worker"] > 0
    assert results["cost"]["per_million_jobs"]["immediate"]["total"] > 0
    assert {t["name"] for t in results["targets"]} >= {
        "requests per immediate no-op job", "write units per immediate no-op job",
        "quiet tenant's queue wait p99 with a tenant at 5x capacity"}

    # Issue 21: the front door under concurrency, counted at the substrate (tiny: emulator).
    door = results["front_door"]["emulator"]
    assert door["floor"]["jobs_per_second"] > 0
    for measured in (*door["api"], door["library"], door["paced"]):
        assert measured["succeeded"] == measured["jobs"]
        operations = measured["requests_by_operation"]
        assert operations["sqs SendMessage"] >= 1  # every job's message, counted at the emulator
        # The benchmark's own reads of the rows it waits for are not the runtime's.
        assert "dynamodb BatchGetItem" not in operations
        assert measured["requests_per_job"] >= sum(operations.values()) - 0.1
    assert door["paced"]["target_rate"] == 0.4 * door["limits"]["rate"]
    assert door["ratios"]["api_to_floor"] > 0
    concurrent = results["cost"]["under_concurrency"]["emulator"]
    assert concurrent["via the API, 2 clients"]["api_gateway"] >= 3.5
    assert concurrent["via the library, 2 threads"]["total"] > 0
    rows = {row["measure"]: row for row in results["front_door_targets"]}
    assert set(rows["AWS requests per job via the API, 8 and 64 clients"]["by_substrate"]) == {
        "emulator"}

    page = (tmp_path / "BENCHMARKS.md").read_text()
    assert "| target | before issue 13 | goal | measured | verdict |" in page
    assert "| measure | now | target | emulator |" in page
    for heading in ("## 1. Throughput", "## 4. AWS requests", "## 5. Cost", "## 7. Cold start",
                    "## 9. The front door under concurrency"):
        assert heading in page


def test_the_dynamodb_local_substrate_sends_each_service_where_it_belongs_and_counts_it(
) -> None:
    """bench.substrate's router: DynamoDB to AWS's DynamoDB Local, SQS to moto, every
    request counted by operation, and queue URLs that name the router (so a request sent to
    a queue URL is counted too)."""
    import boto3

    from bench.local import fake_credentials
    from bench.substrate import started

    fake_credentials()
    with started("dynamodb_local") as substrate:
        dynamodb = boto3.client("dynamodb", endpoint_url=substrate.endpoint)
        sqs = boto3.client("sqs", endpoint_url=substrate.endpoint)
        table = dynamodb.create_table(
            TableName="routed", BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}])
        # DynamoDB Local names its own region in ARNs; moto would name us-east-1.
        assert ":ddblocal:" in table["TableDescription"]["TableArn"]
        url = sqs.create_queue(QueueName="routed")["QueueUrl"]
        assert url.startswith(substrate.endpoint + "/")
        sqs.send_message(QueueUrl=url, MessageBody="hello")
        [message] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
        assert message["Body"] == "hello"
        assert substrate.counts() == {"dynamodb CreateTable": 1, "sqs CreateQueue": 1,
                                      "sqs SendMessage": 1, "sqs ReceiveMessage": 1}


def test_front_door_clients_resend_after_a_429_and_count_it_by_its_message() -> None:
    """bench.front_door's HTTP clients, as a real client: a 429 is sent again after its
    ``Retry-After``, and counted by its message with the tenant's name taken out."""
    import http.server
    import threading

    from bench.front_door import submit_http

    answers = iter([429, 429, 201, 201])
    seen: list[str] = []

    class Api(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"])))["task"])
            status = next(answers)
            body = json.dumps({"job_id": f"j{len(seen)}"} if status == 201 else {"error": {
                "code": "rate_limited", "message": "tenant 'fx' is submitting too fast"}})
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After", "0")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sent = submit_http(f"http://127.0.0.1:{server.server_address[1]}", 2, 1, "fx")
    finally:
        server.shutdown()
        server.server_close()
    assert sent.ids == ["j3", "j4"] and seen == ["bench.echo"] * 4
    assert sent.refusals == {"429 rate_limited: tenant <tenant> is submitting too fast": 2}
