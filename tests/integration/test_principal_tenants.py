"""Behind API Gateway's IAM auth, distinct principals are distinct tenants (issue 18).

Every request goes through the deployed Lambda entry point (``leasehold.handlers.api``) with
the REST proxy event API Gateway builds for an IAM-authorized method: no ``authorizer``, the
caller in ``requestContext.identity``.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from leasehold.compose import compose
from leasehold.core.registry import default_registry
from leasehold.core.spec import JobSpec
from leasehold.handlers import api as api_handler
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit

ACCOUNT = "111122223333"
OTHER_ACCOUNT = "444455556666"

#: Principals the old code folded together: one name as user, role, federated user; the
#: account's root beside principals named ``root``; names that differ only in ``+=,@_``.
PRINCIPALS = {
    "user Bob": f"arn:aws:iam::{ACCOUNT}:user/Bob",
    "role Bob": f"arn:aws:sts::{ACCOUNT}:assumed-role/Bob/laptop",
    "federated Bob": f"arn:aws:sts::{ACCOUNT}:federated-user/Bob",
    "user Bob of another account": f"arn:aws:iam::{OTHER_ACCOUNT}:user/Bob",
    "root": f"arn:aws:iam::{ACCOUNT}:root",
    "user root": f"arn:aws:iam::{ACCOUNT}:user/root",
    "role root": f"arn:aws:sts::{ACCOUNT}:assumed-role/root/s",
    "federated root": f"arn:aws:sts::{ACCOUNT}:federated-user/root",
    "user dev+ci": f"arn:aws:iam::{ACCOUNT}:user/dev+ci",
    "user dev=ci": f"arn:aws:iam::{ACCOUNT}:user/dev=ci",
    "user dev,ci": f"arn:aws:iam::{ACCOUNT}:user/dev,ci",
    "user dev@ci": f"arn:aws:iam::{ACCOUNT}:user/dev@ci",
    "user dev_ci": f"arn:aws:iam::{ACCOUNT}:user/dev_ci",
    "role dev+ci": f"arn:aws:sts::{ACCOUNT}:assumed-role/dev+ci/s",
    "role dev@ci": f"arn:aws:sts::{ACCOUNT}:assumed-role/dev@ci/s",
    "federated dev_ci": f"arn:aws:sts::{ACCOUNT}:federated-user/dev_ci",
    "federated dev,ci": f"arn:aws:sts::{ACCOUNT}:federated-user/dev,ci",
}


def iam_event(method: str, path: str, user_arn: str, body: Any = None) -> dict[str, Any]:
    """The REST proxy event API Gateway sends for a SigV4-signed request it has verified."""
    parts = user_arn.split(":", 5)
    account, resource = (parts[4], parts[5]) if len(parts) == 6 else (ACCOUNT, user_arn)
    kind, _, rest = resource.partition("/")
    # What API Gateway puts in ``caller``/``user``: the principal's unique id (sessions add
    # their name), ``ACCOUNT:NAME`` for a federated user, the account id for root.
    unique = {"user": "AIDAEXAMPLE" + rest.rsplit("/", 1)[-1].upper(),
              "assumed-role": "AROAEXAMPLE:" + rest.rsplit("/", 1)[-1],
              "federated-user": f"{account}:{rest}", "root": account}.get(kind, "AIDAEXAMPLE")
    headers = {
        "Host": "abc123.execute-api.eu-west-1.amazonaws.com",
        "Authorization": "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20261123/eu-west-1/"
                         "execute-api/aws4_request, SignedHeaders=host;x-amz-date, "
                         "Signature=0123",
        "X-Amz-Date": "20261123T180000Z", "X-Amz-Security-Token": "token",
        "Content-Type": "application/json",
    }
    return {
        "resource": "/{proxy+}", "path": path, "httpMethod": method,
        "headers": headers, "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": None, "multiValueQueryStringParameters": None,
        "pathParameters": {"proxy": path.lstrip("/")}, "stageVariables": None,
        "requestContext": {
            "resourceId": "abc", "resourcePath": "/{proxy+}", "httpMethod": method,
            "extendedRequestId": "x", "requestTime": "23/Nov/2026:18:00:00 +0000",
            "path": f"/v1{path}", "accountId": ACCOUNT, "protocol": "HTTP/1.1",
            "stage": "v1", "domainPrefix": "abc123", "requestTimeEpoch": 1795456800000,
            "requestId": str(uuid.uuid4()), "domainName": "abc123.execute-api.eu-west-1."
                                                          "amazonaws.com", "apiId": "abc123",
            "identity": {
                "cognitoIdentityPoolId": None, "cognitoIdentityId": None,
                "cognitoAuthenticationType": None, "cognitoAuthenticationProvider": None,
                "principalOrgId": None, "apiKey": None, "apiKeyId": None,
                "accountId": account, "caller": unique, "user": unique,
                "accessKey": "ASIAEXAMPLE", "sourceIp": "203.0.113.9",
                "userAgent": "leasehold-cli", "userArn": user_arn,
            },
        },
        "body": None if body is None else json.dumps(body), "isBase64Encoded": False,
    }


@dataclass
class LambdaContext:
    function_name: str = "leasehold-api"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = f"arn:aws:lambda:eu-west-1:{ACCOUNT}:function:leasehold-api"
    aws_request_id: str = "req-1"


def call(method: str, path: str, user_arn: str, body: Any = None) -> tuple[int, Any]:
    response = api_handler.handler(iam_event(method, path, user_arn, body), LambdaContext())
    text = response.get("body") or ""
    return response["statusCode"], json.loads(text) if text else None


@pytest.fixture
def deployed(app: Leasehold, monkeypatch: pytest.MonkeyPatch) -> Iterator[Leasehold]:
    """The environment the deployed API function gets, pointing at this test's tables."""
    for name, value in app.settings.to_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LEASEHOLD_TASKS", "examples.tasks")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Leasehold")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "leasehold")
    monkeypatch.delenv("LEASEHOLD_TRUST_TENANT_HEADER", raising=False)
    api_handler._app.cache_clear()
    yield app
    api_handler._app.cache_clear()


def test_distinct_principals_get_distinct_tenants_and_cannot_touch_each_others_jobs(
        deployed: Leasehold) -> None:
    jobs: dict[str, str] = {}
    tenants: dict[str, str] = {}
    for who, arn in PRINCIPALS.items():
        status, job = call("POST", "/jobs", arn, {"task": "echo", "payload": {"secret": who}})
        assert status == 201, job
        jobs[who], tenants[who] = job["job_id"], job["tenant"]
    assert len(set(tenants.values())) == len(PRINCIPALS), tenants
    assert tenants["user Bob"] == f"{ACCOUNT}:user/Bob"
    assert tenants["role Bob"] == f"{ACCOUNT}:role/Bob"
    assert tenants["federated Bob"] == f"{ACCOUNT}:federated-user/Bob"
    assert tenants["root"] == f"{ACCOUNT}:root"
    assert tenants["user dev+ci"] == f"{ACCOUNT}:user/dev+ci"

    for reader, owner in itertools.permutations(PRINCIPALS, 2):
        status, body = call("GET", f"/jobs/{jobs[owner]}", PRINCIPALS[reader])
        assert status == 404, (reader, owner, body)
        assert call("DELETE", f"/jobs/{jobs[owner]}", PRINCIPALS[reader])[0] == 404
    for who, arn in PRINCIPALS.items():
        status, listing = call("GET", "/jobs", arn)
        assert [job["job_id"] for job in listing["jobs"]] == [jobs[who]]
        status, job = call("GET", f"/jobs/{jobs[who]}", arn)
        assert status == 200 and job["payload"] == {"secret": who}
        assert job["state"] == "QUEUED"  # no one else's cancel landed


def test_sessions_of_one_role_share_its_tenant(deployed: Leasehold) -> None:
    first = f"arn:aws:sts::{ACCOUNT}:assumed-role/Deploy/alice-laptop"
    second = f"arn:aws:sts::{ACCOUNT}:assumed-role/Deploy/ci-run-42"
    status, job = call("POST", "/jobs", first, {"task": "echo"})
    assert status == 201
    assert call("GET", f"/jobs/{job['job_id']}", second)[0] == 200
    assert call("DELETE", f"/jobs/{job['job_id']}", second)[1]["state"] == "CANCELLED"


def test_the_operators_mapping_joins_principals_and_keeps_an_old_tenant_reachable(
        deployed: Leasehold, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before issue 18, user Bob's tenant was "ACCOUNT:Bob" (shared with role Bob and any
    # federated user named Bob); the mapping gives it back to user Bob alone.
    old_api = compose(deployed.settings.with_(task_modules=("examples.tasks",)),
                      registry=default_registry)
    legacy = submit(old_api, JobSpec(task="echo", payload="old", tenant=f"{ACCOUNT}:Bob"))
    monkeypatch.setenv("LEASEHOLD_TENANT_MAP", json.dumps({
        f"arn:aws:iam::{ACCOUNT}:user/Bob": f"{ACCOUNT}:Bob",
        f"arn:aws:iam::{ACCOUNT}:role/team/Deploy": "payments",
        f"{ACCOUNT}:user/alice@corp": "payments",
    }))
    api_handler._app.cache_clear()
    bob = PRINCIPALS["user Bob"]
    status, job = call("GET", f"/jobs/{legacy.job.job_id}", bob)
    assert status == 200 and job["payload"] == "old" and job["tenant"] == f"{ACCOUNT}:Bob"
    for other in ("role Bob", "federated Bob"):
        assert call("GET", f"/jobs/{legacy.job.job_id}", PRINCIPALS[other])[0] == 404

    deploy = f"arn:aws:sts::{ACCOUNT}:assumed-role/Deploy/pipeline"
    alice = f"arn:aws:iam::{ACCOUNT}:user/sales/alice@corp"
    status, job = call("POST", "/jobs", deploy, {"task": "echo"})
    assert status == 201 and job["tenant"] == "payments"
    assert call("GET", f"/jobs/{job['job_id']}", alice)[0] == 200
    assert call("GET", f"/jobs/{job['job_id']}", PRINCIPALS["user dev+ci"])[0] == 404


@pytest.mark.parametrize("arn", [
    f"arn:aws:sts::{ACCOUNT}:assumed-role/NoSession",
    f"arn:aws:iam::{ACCOUNT}:group/Admins",
    f"arn:aws:sts::{ACCOUNT}:federated-user/has space",
    "not-an-arn",
])
def test_an_identity_that_names_no_principal_is_refused(deployed: Leasehold, arn: str) -> None:
    status, body = call("POST", "/jobs", arn, {"task": "echo"})
    assert status == 401 and body["error"]["code"] == "unauthenticated"
    assert deployed.clients.dynamodb.scan(TableName=deployed.settings.jobs_table)["Count"] == 0
