"""Every outbound call of a target carries the targets role's credentials, never the worker's
(issue 43): a sigv4 signature and an AWS target's client are made from the keys STS issued
for the job's own session, whose policy narrows it to the call's resource and denies
Leasehold's own. The issue's attacks are refused at submission, and a payload that skipped
submission is refused again at run time; were that check missed too, the call would still go
out under the session that may not touch the jobs table.

moto plays STS (in-process here; the moto server process in the ``leasehold dev`` test): it
issues temporary ``ASIA`` keys and records each session's name and policy, which these tests
read back by the key that reached the server.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto.sts.models import sts_backends

from leasehold.aws.clients import Clients
from leasehold.aws.faults import Fault, FaultInjector
from leasehold.core.policy import RetryPolicy
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.local.dev_targets import dev_targets_role
from leasehold.settings import Settings
from leasehold.targets import Targets, aws
from leasehold.targets.credentials import (
    NoTargetsRole,
    RoleClients,
    TargetCredentials,
    Who,
    session_name,
)
from leasehold.targets.http_call import Caller, call
from leasehold.targets.signing import NotSigned
from tests.conftest import MakeApp
from tests.integration.api_client import api_for
from tests.integration.helpers import deliver
from tests.integration.target_server import Server, serve
from tests.integration.test_targets_http import run_until
from tests.unit.test_target_trust import GETITEM_ATTACK, SCAN_ATTACK

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/lh-targets"
ORDERS = f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/orders"
_CREDENTIAL = re.compile(r"Credential=([A-Z0-9]+)/")


@pytest.fixture
def server() -> Iterator[Server]:
    yield from serve()


def _app(make_app: MakeApp, server: Server | None = None, **overrides: Any) -> Leasehold:
    targets: dict[str, Any] = {
        "http_allow": ["127.0.0.0/8"],
        "aws_targets": [{"action": "sts:GetCallerIdentity", "resources": ["*"]},
                        {"action": "dynamodb:GetItem", "resources": [ORDERS]},
                        {"action": "sqs:SendMessage", "resources": ["*"]}]}
    if server is not None:
        targets["http_sigv4"] = [{"url_prefix": f"{server.url}/prod/",
                                  "service": "execute-api", "region": "eu-west-1"}]
    return make_app(**{"targets_role_arn": ROLE, "targets": targets, **overrides})


def _session(access_key: str) -> Any:
    """The session STS issued ``access_key`` for (its name and policy), as moto recorded it."""
    found = sts_backends[ACCOUNT]["aws"].get_assumed_role_from_access_key(access_key)
    assert found is not None, f"{access_key} was not issued by AssumeRole"
    return found


def _worker_key() -> str:
    return str(boto3.session.Session().get_credentials().access_key)


def test_an_aws_target_runs_as_the_job_s_own_session_of_the_targets_role(
        make_app: MakeApp) -> None:
    app = _app(make_app)
    job = submit(app, JobSpec(tenant="acme", target={"aws": {
        "service": "sts", "action": "GetCallerIdentity"}})).job
    deliver(app)
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED, done.error
    caller = json.loads(done.result_json or "{}")
    expected = session_name(Who(tenant="acme", job_id=job.job_id))
    assert caller["Arn"] == f"arn:aws:sts::{ACCOUNT}:assumed-role/lh-targets/{expected}"
    assert job.job_id in expected and "acme" in expected
    # ... and not the worker's own identity, which the worker's client still has.
    assert app.clients.client("sts").get_caller_identity()["Arn"] != caller["Arn"]


def test_a_sigv4_target_is_signed_with_the_assumed_keys_of_the_job_s_session(
        make_app: MakeApp, server: Server) -> None:
    app = _app(make_app, server)
    job = submit(app, JobSpec(tenant="acme", target={"http": {
        "url": f"{server.url}/prod/orders?x=1", "method": "POST", "body": {"id": 7},
        "auth": {"sigv4": {"service": "execute-api"}}}})).job
    deliver(app)
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    [request] = server.requests
    key = _CREDENTIAL.search(request.headers["Authorization"])
    assert key is not None and key[1].startswith("ASIA") and key[1] != _worker_key()
    assert "/eu-west-1/execute-api/aws4_request" in request.headers["Authorization"]
    assert request.headers["X-Amz-Security-Token"]  # a session's, which the worker has not
    session = _session(key[1])
    assert session.role_arn == ROLE
    assert session.session_name == session_name(Who(tenant="acme", job_id=job.job_id))
    statements = json.loads(session.policy)["Statement"]
    assert statements[0] == {"Effect": "Allow", "Action": "execute-api:Invoke",
                             "Resource": [f"arn:aws:execute-api:eu-west-1:{ACCOUNT}:127/prod/*"]}
    assert f"arn:*:dynamodb:*:*:table/{app.settings.jobs_table}" in statements[1]["Resource"]
    rows = app.clients.dynamodb.scan(TableName=app.settings.jobs_table)["Items"]
    assert "AWS4-HMAC-SHA256" not in json.dumps(rows) and key[1] not in json.dumps(rows)


def test_the_issue_s_attacks_are_refused_by_the_api_with_422_and_nothing_is_made(
        make_app: MakeApp) -> None:
    app = _app(make_app)
    api = api_for(app)
    scan = api.post("/jobs", {"target": {"http": {**SCAN_ATTACK, "body": {
        "TableName": app.settings.jobs_table}}}}, tenant="mallory")
    assert scan.status == 422 and "target.http.auth.sigv4" in json.dumps(scan.body)
    get = api.post("/jobs", {"target": {"aws": {**GETITEM_ATTACK, "parameters": {
        **GETITEM_ATTACK["parameters"], "TableName": app.settings.jobs_table}}}},
        tenant="mallory")
    assert get.status == 422 and "target.aws.parameters.TableName" in json.dumps(get.body)
    assert app.clients.dynamodb.scan(TableName=app.settings.jobs_table)["Items"] == []


def _recorder(monkeypatch: pytest.MonkeyPatch, server: Server) -> None:
    """DynamoDB calls made from now on by a new client go to ``server``, which records them
    (the app's own client, built already, stays on moto)."""
    server.default = (200, {"Content-Type": "application/x-amz-json-1.0"}, b"{}")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", server.url)


def test_a_crafted_payload_that_skipped_submission_is_refused_before_any_call(
        make_app: MakeApp, server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app(make_app)
    targets = Targets(app)
    _recorder(monkeypatch, server)
    crafted = {**GETITEM_ATTACK, "parameters": {**GETITEM_ATTACK["parameters"],
                                                "TableName": app.settings.jobs_table}}
    with pytest.raises(aws.AwsRefused, match="Leasehold's own"):
        aws.call(targets.config, targets.credentials, crafted, Who("mallory", "j1"))
    assert server.requests == []
    # The signed Scan, run directly: the signer refuses a URL no prefix lists, so nothing
    # is sent (its name resolves to the local server, as it would to DynamoDB).
    port = int(server.url.rsplit(":", 1)[1])

    def resolve(host: str, *args: Any) -> list[Any]:
        assert host == "dynamodb.us-east-1.amazonaws.com"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    caller = Caller(targets.config, now_ms=app.clock.now_ms, resolve=resolve,
                    sign=targets.signer)
    payload = {"url": SCAN_ATTACK["url"], "method": "POST", "headers": SCAN_ATTACK["headers"],
               "body": {"TableName": app.settings.jobs_table}, "timeout_seconds": 5.0,
               "success": ["2xx"], "follow_redirects": False, "response_headers": [],
               "auth": {"sigv4": {"service": "dynamodb", "region": None}}}
    with pytest.raises(NotSigned):
        call(caller, payload)
    assert server.requests == []


def test_were_the_resource_check_missed_the_call_still_runs_as_the_narrow_session(
        make_app: MakeApp, server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app(make_app)
    targets = Targets(app)
    _recorder(monkeypatch, server)
    monkeypatch.setattr(aws, "check_resources", lambda *args: [])  # the check, missed
    crafted = {**GETITEM_ATTACK, "parameters": {**GETITEM_ATTACK["parameters"],
                                                "TableName": app.settings.jobs_table}}
    aws.call(targets.config, targets.credentials, crafted, Who("mallory", "j1"))
    [request] = server.requests  # the GetItem, at the recorder playing DynamoDB
    key = _CREDENTIAL.search(request.headers["Authorization"])
    assert key is not None and key[1] != _worker_key()
    session = _session(key[1])
    assert session.role_arn == ROLE and session.session_name == "lh.mallory@j1"
    statements = json.loads(session.policy)["Statement"]
    # Nothing allowed (the jobs table is no listed resource), Leasehold's tables denied.
    assert [s["Effect"] for s in statements] == ["Deny"]
    assert f"arn:*:dynamodb:*:*:table/{app.settings.jobs_table}" in statements[0]["Resource"]


def test_without_a_targets_role_nothing_runs_with_the_worker_s_credentials(
        make_app: MakeApp, server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    app = _app(make_app, targets_role_arn=None)
    targets = Targets(app)
    _recorder(monkeypatch, server)
    orders = {**GETITEM_ATTACK, "parameters": {**GETITEM_ATTACK["parameters"],
                                               "TableName": "orders"}}
    with pytest.raises(NoTargetsRole):
        aws.call(targets.config, targets.credentials, orders, Who("acme", "j1"))
    assert server.requests == []


def test_a_failed_assume_role_fails_the_attempt_and_the_retry_runs_under_the_role(
        make_app: MakeApp) -> None:
    app = _app(make_app)
    sqs = app.clients.client("sqs")
    inbox = sqs.create_queue(QueueName="creds-inbox")["QueueUrl"]
    injector = FaultInjector([Fault(target="sts.AssumeRole", kind="fail", times=None)])
    injector.install(app.clients.client("sts"))  # the worker's own STS client assumes
    job = submit(app, JobSpec(target={"aws": {"service": "sqs", "action": "SendMessage",
                                              "parameters": {"QueueUrl": inbox,
                                                             "MessageBody": "once"}}},
                              retry=RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0))
                 ).job
    deliver(app, once=True)
    failed = app.store.get(job.job_id)
    assert sum(injector.injected.values()) >= 1
    assert failed.state is JobState.QUEUED and failed.error is not None
    assert failed.error.type == "RoleUnavailable"
    assert "Messages" not in sqs.receive_message(QueueUrl=inbox)  # nothing sent without it
    injector.faults.clear()
    run_until(app, job.job_id, JobState.SUCCEEDED)
    [message] = sqs.receive_message(QueueUrl=inbox)["Messages"]
    assert message["Body"] == "once"


def test_a_job_s_credentials_are_assumed_once_and_reused_until_near_expiry(
        make_app: MakeApp) -> None:
    app = _app(make_app)
    assumed = sts_backends[ACCOUNT]["aws"].assumed_roles
    credentials = TargetCredentials(ROLE, app.clients)
    before = len(assumed)
    first = credentials.get(Who("acme", "j1"), None)
    assert credentials.get(Who("acme", "j1"), None) == first  # cached: one AssumeRole
    assert credentials.get(Who("acme", "j2"), None) != first  # another job: its own
    assert len(assumed) == before + 2


def test_leasehold_dev_makes_a_targets_role_in_the_emulator_and_assumes_it(
        endpoint: str) -> None:
    settings = Settings(endpoint_url=endpoint, queue_prefix="lhdev")
    role = dev_targets_role(settings)
    assert role.endswith(":role/lhdev-targets") and dev_targets_role(settings) == role
    credentials = TargetCredentials(role, Clients(settings))
    keys = credentials.get(Who("acme", "job-1"), None)
    assert keys.access_key.startswith("ASIA")
    identity = credentials.client("sts", keys).get_caller_identity()
    assert identity["Arn"].endswith(":assumed-role/lhdev-targets/lh.acme@job-1")


def test_a_deployment_secret_is_read_under_the_targets_role_not_the_worker_s(
        make_app: MakeApp, server: Server) -> None:
    app = make_app(targets_role_arn=ROLE, targets={
        "http_allow": ["127.0.0.0/8"],
        "http_secrets": {"partner-api-key": {"secret": "secretsmanager:creds-key",
                                             "origins": [server.url]}}})
    app.clients.client("secretsmanager").create_secret(Name="creds-key", SecretString="k-42")
    assumed = sts_backends[ACCOUNT]["aws"].assumed_roles
    before = len(assumed)
    job = submit(app, JobSpec(target={"http": {"url": f"{server.url}/hook", "auth": {
        "secret_header": {"name": "X-Token", "secret": "partner-api-key"}}}})).job
    deliver(app)
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    assert server.requests[0].headers["X-Token"] == "k-42"
    [reader] = assumed[before:]
    assert reader.role_arn == ROLE and reader.session_name == "leasehold-secrets"
    assert {s["Action"] for s in json.loads(reader.policy)["Statement"]} == \
        set(RoleClients.ACTIONS)
