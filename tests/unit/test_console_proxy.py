"""``leasehold console``: serves the page itself, forwards only the page's calls, signs them.

The upstream here is a local HTTP server that records what reaches it, so the test sees the
forwarded request exactly as API Gateway would; no AWS call is made.
"""

from __future__ import annotations

import datetime
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import botocore.auth
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from leasehold.cli import main
from leasehold.cli.client import region_of
from leasehold.cli.console import ConsoleServer, Upstream

KEY, SECRET, TOKEN = "AKIDCONSOLEEXAMPLE", "console/secret/example", "session-token-example"


@dataclass
class Seen:
    requests: list[dict[str, Any]] = field(default_factory=list)


class _Recorder(BaseHTTPRequestHandler):
    server: Any

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.seen.requests.append({
            "method": self.command, "path": self.path, "headers": dict(self.headers.items()),
            "body": self.rfile.read(length) if length else b""})
        body = json.dumps({"jobs": [], "next_cursor": None}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Retry-After", "7")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _record

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def upstream() -> Iterator[tuple[str, Seen]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.seen = Seen()  # type: ignore[attr-defined]
    _serve(server)
    yield f"http://127.0.0.1:{server.server_address[1]}", server.seen  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")


def start_console(upstream_url: str, **options: Any) -> Iterator[str]:
    server = ConsoleServer(Upstream(upstream_url, **options), port=0)
    _serve(server)
    yield server.url.rstrip("/")
    server.shutdown()
    server.server_close()


@pytest.fixture
def signing_console(upstream: tuple[str, Seen], credentials: None) -> Iterator[str]:
    yield from start_console(upstream[0] + "/v1", aws_auth=True)


def call(url: str, method: str = "GET", body: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers.items()), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers.items()), exc.read()


PAGE = {"X-Leasehold-Console": "1"}


def test_a_forwarded_call_carries_a_valid_sigv4_signature_for_execute_api(
        signing_console: str, upstream: tuple[str, Seen], monkeypatch: pytest.MonkeyPatch
) -> None:
    body = json.dumps({"task": "echo", "payload": {"n": 1}}).encode()
    status, headers, answer = call(
        signing_console + "/jobs?limit=5&state=DEAD", "POST", body,
        {**PAGE, "Content-Type": "application/json", "X-Leasehold-Tenant": "acme",
         "Cookie": "session=private"})
    assert status == 200 and json.loads(answer) == {"jobs": [], "next_cursor": None}
    assert headers["Retry-After"] == "7"  # the API's answer headers come back
    [seen] = upstream[1].requests
    assert (seen["method"], seen["path"], seen["body"]) == ("POST", "/v1/jobs?limit=5&state=DEAD",
                                                            body)
    got = {k.lower(): v for k, v in seen["headers"].items()}
    assert "cookie" not in got and "x-leasehold-console" not in got
    assert got["x-leasehold-tenant"] == "acme" and got["x-amz-security-token"] == TOKEN
    stamp = got["x-amz-date"]
    scope = f"{KEY}/{stamp[:8]}/eu-west-1/execute-api/aws4_request"
    assert got["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={scope}, ")

    # Sign the same request again, independently, at the time the proxy signed it: a valid
    # signature is the one botocore computes for these credentials, this request and scope.
    signed = got["authorization"].split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "x-amz-date", "content-type", "x-leasehold-tenant"} <= set(signed)
    at = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ")
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: at)
    request = AWSRequest(method="POST", url=upstream[0] + "/v1/jobs?limit=5&state=DEAD",
                         data=body, headers={name: got[name] for name in signed
                                             if name not in ("host", "x-amz-date",
                                                             "x-amz-security-token")})
    SigV4Auth(Credentials(KEY, SECRET, TOKEN), "execute-api", "eu-west-1").add_auth(request)
    assert request.headers["Authorization"] == got["authorization"]


def test_the_page_is_served_locally_and_calls_without_the_pages_marker_are_refused(
        signing_console: str, upstream: tuple[str, Seen]) -> None:
    status, headers, page = call(signing_console + "/")
    assert status == 200 and b"<title>Leasehold console</title>" in page
    assert headers["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    status, headers, script = call(signing_console + "/console/app.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    assert b"hashchange" in script
    # Another site's script cannot add the marker without a preflight the proxy never grants.
    assert call(signing_console + "/jobs")[0] == 403
    assert call(signing_console + "/jobs", "OPTIONS")[0] == 403
    # A DNS-rebinding page reaches 127.0.0.1 under its own name: refused by Host.
    assert call(signing_console + "/jobs", headers={**PAGE, "Host": "evil.example"})[0] == 403
    assert upstream[1].requests == []


def test_without_aws_auth_nothing_is_signed_and_an_unreachable_api_is_a_clear_502(
        upstream: tuple[str, Seen]) -> None:
    for url in start_console(upstream[0]):
        assert call(url + "/stats", headers=PAGE)[0] == 200
        assert "authorization" not in {k.lower() for k in upstream[1].requests[0]["headers"]}
    for url in start_console("http://127.0.0.1:9"):  # nothing listens on the discard port
        status, _, body = call(url + "/stats", headers=PAGE)
        assert status == 502 and json.loads(body)["error"]["code"] == "unreachable"


@pytest.mark.parametrize(("url", "region"), [
    ("https://abc123.execute-api.eu-west-1.amazonaws.com/v1", "eu-west-1"),
    ("https://abc123.execute-api.ap-southeast-2.amazonaws.com/prod/jobs", "ap-southeast-2"),
    ("https://api.example.com/v1", None),
    ("http://127.0.0.1:8080", None),
])
def test_the_region_to_sign_for_comes_from_an_api_gateway_url(url: str,
                                                              region: str | None) -> None:
    assert region_of(url) == region


@pytest.mark.parametrize(("argv", "message"), [
    (["--url", "ftp://example.com"], "--url must be an http(s) URL"),
    (["--url", "http://127.0.0.1:8080/?x=1"], "without ?query"),
    (["--port", "70000"], "--port must be 0..65535"),
    (["--aws-auth", "--url", "https://api.example.com/v1"], "give --region"),
])
def test_bad_options_are_refused_with_a_clear_message(
        argv: list[str], message: str, credentials: None, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    assert main(["console", *argv]) == 2
    assert message in capsys.readouterr().err


def test_aws_auth_without_credentials_is_refused_before_listening(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.setenv(name, "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata lookups
    assert main(["console", "--aws-auth", "--url",
                 "https://abc.execute-api.eu-west-1.amazonaws.com/v1"]) == 2
    assert "--aws-auth needs AWS credentials" in capsys.readouterr().err


def test_swagger_ui_is_reachable_by_hand_through_the_signing_console(
        signing_console: str, upstream: tuple[str, Seen]) -> None:
    # Opened in the browser: no console marker, yet forwarded and signed (GET /docs only).
    status, _, _ = call(signing_console + "/docs")
    assert status == 200
    status, _, _ = call(signing_console + "/docs?format=json")
    assert status == 200
    assert [r["path"] for r in upstream[1].requests] == ["/v1/docs", "/v1/docs?format=json"]
    assert all(r["headers"]["Authorization"].startswith("AWS4-HMAC-SHA256")
               for r in upstream[1].requests)
    # Anything else without the marker is still refused, a POST to /docs too.
    assert call(signing_console + "/jobs")[0] == 403
    assert call(signing_console + "/docs", "POST", b"{}")[0] == 403
    assert len(upstream[1].requests) == 2
