"""The local API answers curl and its own console, never another web page (issue 18).

Against a real ``leasehold dev``: what a browser sends for a cross-site ``text/plain`` POST
(a CORS simple request: no preflight, so only the server can refuse it), for a read with a
foreign ``Origin``, and for a DNS-rebinding page (its own name in ``Host``).
"""

from __future__ import annotations

import http.client
import json
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from leasehold.settings import Settings

from .conftest import Runtime, start_runtime

# A payload no port number, date or message can contain by chance (a port once held "42").
SECRET = "s3cret-payload-9f1c"

#: Every route that creates or changes something, each with a body it accepts from curl.
WRITES = [
    ("/jobs", {"task": "echo", "payload": {"from": "evil"}}),
    ("/schedules", {"cron": "* * * * *", "task": "echo"}),
    ("/workflows", {"steps": [{"id": "a", "task": "echo"}]}),
    ("/triggers", {"pattern": {"source": ["shop"]}, "task": "echo"}),
    ("/events", {"source": "shop", "detail-type": "x", "detail": {}}),
    ("/dead-letters/redrive", {"pool": "default"}),
]


@pytest.fixture(scope="module")
def runtime() -> Iterator[Runtime]:
    started = start_runtime("--workers", "1", "--allow-host", "devbox.lan")
    yield started
    started.stop()


@pytest.fixture
def tenant() -> str:
    """The victim: a tenant of its own per test, so each test sees only its own writes."""
    return "victim-" + uuid.uuid4().hex[:8]


def send(runtime: Runtime, method: str, path: str, body: str | None = None,
         headers: dict[str, str] | None = None, *, tenant: str) -> tuple[int, Any]:
    """One request with exactly these headers (http.client adds only Host, when not given)."""
    url = urlsplit(runtime.url)
    connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=30)
    sent = {"X-Leasehold-Tenant": tenant, **(headers or {})}
    try:
        connection.putrequest(method, path, skip_host="Host" in sent,
                              skip_accept_encoding=True)
        for name, value in sent.items():
            connection.putheader(name, value)
        data = body.encode() if body is not None else b""
        if body is not None:
            connection.putheader("Content-Length", str(len(data)))
        connection.endheaders(data or None)
        response = connection.getresponse()
        text = response.read()
    finally:
        connection.close()
    return response.status, json.loads(text) if text else None


def port_of(runtime: Runtime) -> int:
    port = urlsplit(runtime.url).port
    assert port is not None
    return port


def nothing_was_written(runtime: Runtime, tenant: str) -> None:
    for path, key in (("/jobs", "jobs"), ("/schedules", "schedules"),
                      ("/workflows", "workflows"), ("/triggers", "triggers")):
        status, answer = send(runtime, "GET", path, tenant=tenant)
        assert status == 200 and answer[key] == [], (path, answer)


@pytest.mark.parametrize(("path", "body"), WRITES)
def test_a_cross_site_text_plain_post_is_refused_and_writes_nothing(
        runtime: Runtime, tenant: str, path: str, body: dict[str, Any]) -> None:
    # What <form enctype="text/plain"> or fetch(..., {mode: "no-cors"}) on evil.example sends.
    status, answer = send(runtime, "POST", path, json.dumps(body), {
        "Origin": "https://evil.example", "Content-Type": "text/plain;charset=UTF-8",
        "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, tenant=tenant)
    assert status == 403 and answer["error"]["code"] == "forbidden", answer
    assert "Origin" in answer["error"]["message"]
    nothing_was_written(runtime, tenant)


@pytest.mark.parametrize("origin", [
    "https://evil.example", "http://evil.example", "null", "http://127.0.0.1:1",
    "https://127.0.0.1",
])
def test_a_foreign_origin_is_refused_on_reads_and_on_retries(runtime: Runtime, tenant: str,
                                                            origin: str) -> None:
    job = runtime.submit({"task": "echo", "payload": {"secret": SECRET}}, tenant=tenant)
    for method, path in (("GET", f"/jobs/{job['job_id']}"), ("GET", "/jobs"),
                         ("POST", f"/jobs/{job['job_id']}/retry"),
                         ("DELETE", f"/jobs/{job['job_id']}"), ("OPTIONS", "/jobs")):
        status, answer = send(runtime, method, path, headers={"Origin": origin}, tenant=tenant)
        assert status == 403, (method, path, answer)
        assert SECRET not in json.dumps(answer)
    assert runtime.job(job["job_id"], tenant=tenant)["state"] != "CANCELLED"


@pytest.mark.parametrize("host", ["evil.example:{port}", "evil.example",
                                  "127.0.0.1.nip.io:{port}", "localhost:1", "",
                                  "127.0.0.1:{port}@evil.example"])
def test_a_rebinding_host_is_refused_before_anything_is_read_or_written(
        runtime: Runtime, tenant: str, host: str) -> None:
    job = runtime.submit({"task": "echo", "payload": {"secret": SECRET}}, tenant=tenant)
    host = host.format(port=port_of(runtime))
    # A DNS-rebinding page is same-origin with itself: it sends its own name, and an Origin
    # that matches it (or none, for a GET).
    for headers in ({"Host": host}, {"Host": host, "Origin": f"http://{host}"}):
        status, answer = send(runtime, "GET", f"/jobs/{job['job_id']}", headers=headers,
                              tenant=tenant)
        assert status == 403 and "Host" in answer["error"]["message"], answer
        assert SECRET not in json.dumps(answer)
        status, answer = send(runtime, "POST", "/jobs", json.dumps({"task": "echo"}),
                              {**headers, "Content-Type": "text/plain"}, tenant=tenant)
        assert status == 403, answer
    jobs = runtime.call("GET", "/jobs", tenant=tenant).body["jobs"]
    assert [j["job_id"] for j in jobs] == [job["job_id"]]


def test_the_readme_curl_lines_and_the_consoles_own_origin_still_work(runtime: Runtime,
                                                                     tenant: str) -> None:
    port = port_of(runtime)
    # README: `curl -s -X POST localhost:8080/jobs -d '{...}'` (curl says form-urlencoded).
    for host in ("localhost", "127.0.0.1"):
        done = subprocess.run(
            ["curl", "-s", "-X", "POST", f"{host}:{port}/jobs", "-H", "X-Leasehold-Tenant: acme",
             "-d", '{"task": "echo", "payload": {"hi": 1}, "priority": "high"}'],
            capture_output=True, text=True, timeout=30, check=True)
        job = json.loads(done.stdout)
        assert job["state"] in ("QUEUED", "RUNNING", "SUCCEEDED"), done.stdout
        done = subprocess.run(["curl", "-s", f"{host}:{port}/jobs/{job['job_id']}", "-H",
                               "X-Leasehold-Tenant: acme"],
                              capture_output=True, text=True, timeout=30, check=True)
        assert json.loads(done.stdout)["payload"] == {"hi": 1}
    # The console's own fetch: Chromium sends Origin on a same-origin POST.
    for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
        status, answer = send(runtime, "POST", "/jobs", json.dumps({"task": "echo"}),
                              {"Origin": origin, "Content-Type": "application/json"},
                              tenant=tenant)
        assert status == 201, answer
    # A name given with --allow-host (a LAN name when listening on 0.0.0.0).
    status, answer = send(runtime, "GET", "/jobs", headers={"Host": f"devbox.lan:{port}"},
                          tenant=tenant)
    assert status == 200 and len(answer["jobs"]) == 2, answer
    status, answer = send(runtime, "GET", "/openapi.json",
                          headers={"Host": f"LOCALHOST:{port}"}, tenant=tenant)
    assert status == 200


def test_the_embedded_emulator_answers_the_sdks_but_no_web_page(runtime: Runtime,
                                                                tenant: str) -> None:
    """moto grants every origin CORS and checks no signature: a page that found its port
    could otherwise read every job's payload straight from the table."""
    runtime.submit({"task": "echo", "payload": {"secret": SECRET}}, tenant=tenant)
    [line] = [line for line in runtime.output if line.strip().startswith("AWS:")]
    endpoint = urlsplit(line.split()[1])
    scan = json.dumps({"TableName": Settings().jobs_table})
    headers = {"Content-Type": "application/x-amz-json-1.0",
               "X-Amz-Target": "DynamoDB_20120810.Scan",
               # Any signature: moto reads the service from it and checks nothing.
               "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261123/us-east-1/"
                                "dynamodb/aws4_request, SignedHeaders=host, Signature=0"}

    def ask(extra: dict[str, str], method: str = "POST") -> tuple[int, bytes]:
        connection = http.client.HTTPConnection(endpoint.hostname or "", endpoint.port,
                                                timeout=30)
        try:
            connection.request(method, "/", scan, {**headers, **extra})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    status, body = ask({})  # what the SDK sends: the runtime's own tables
    assert status == 200 and SECRET.encode() in body
    for extra, method in (({"Origin": "https://evil.example"}, "POST"),
                          ({"Origin": "https://evil.example",
                            "Access-Control-Request-Method": "POST",
                            "Access-Control-Request-Headers": "x-amz-target"}, "OPTIONS"),
                          ({"Host": f"evil.example:{endpoint.port}"}, "POST")):
        status, body = ask(extra, method)
        assert status == 403 and SECRET.encode() not in body, (extra, body)
