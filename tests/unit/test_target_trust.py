"""The trust boundary of a target, checked at submission: a signature only for a URL and
service the deployment lists, an AWS endpoint only where listed, and an AWS target only on
the resources its grant lists and never on Leasehold's own (issue 43, defects 1 and 5).
The requests are the issue's attacker's, exactly."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leasehold.errors import ValidationError
from leasehold.settings import Settings
from leasehold.targets import aws, http_spec
from leasehold.targets.config import TargetConfig
from leasehold.targets.credentials import SESSION_NAME_LIMIT, Who, session_name
from leasehold.targets.failures import AddressRefused
from leasehold.targets.http_call import _next_hop

ROLE = "arn:aws:iam::123456789012:role/lh-targets"
API = "https://abc.execute-api.us-east-1.amazonaws.com/prod/"
ORDERS = "arn:aws:dynamodb:us-east-1:123456789012:table/orders"
SETTINGS = Settings(
    jobs_table="lh-jobs", schedules_table="lh-schedules", tenants_table="lh-tenants",
    coordination_table="lh-coordination", workflows_table="lh-workflows", queue_prefix="lh",
    event_bus="lh-events", targets_role_arn=ROLE,
    targets={
        "http_sigv4": [{"url_prefix": API, "service": "execute-api"}],
        "http_allow": ["public-bucket.s3.amazonaws.com"],
        "http_secrets": {"partner-api-key": {"secret": "secretsmanager:partner/api-key",
                                             "origins": ["https://api.partner.example"]}},
        "aws_targets": [
            {"action": "sns:Publish", "resources": ["arn:aws:sns:us-east-1:123456789012:*"]},
            {"action": "dynamodb:GetItem", "resources": [ORDERS]},
            {"action": "dynamodb:Scan", "resources": ["arn:aws:dynamodb:*:*:table/*"]},
            {"action": "dynamodb:TransactWriteItems",
             "resources": ["arn:aws:dynamodb:*:*:table/*"]},
            {"action": "dynamodb:BatchGetItem", "resources": ["*"]},
            {"action": "sqs:SendMessage", "resources": ["*"]},
            {"action": "events:PutEvents", "resources": ["*"]},
            {"action": "secretsmanager:GetSecretValue", "resources": ["*"]},
            {"action": "sts:GetCallerIdentity", "resources": ["*"]},
        ]})
CONFIG = TargetConfig.from_settings(SETTINGS)

#: Defect 1 as the issue reproduced it: DynamoDB's API, signed for dynamodb.
SCAN_ATTACK = {"url": "http://dynamodb.us-east-1.amazonaws.com/", "method": "POST",
               "headers": {"X-Amz-Target": "DynamoDB_20120810.Scan"},
               "body": {"TableName": "lh-jobs"}, "auth": {"sigv4": {"service": "dynamodb"}}}
#: Defect 5 as the issue reproduced it: GetItem on the jobs table, by another tenant's job.
GETITEM_ATTACK = {"service": "dynamodb", "action": "GetItem",
                  "parameters": {"TableName": "lh-jobs",
                                 "Key": {"pk": {"S": "job#other-tenant#01J0"}}}}


def refused(kind: str, value: dict[str, Any], config: TargetConfig = CONFIG) -> ValidationError:
    prepare = http_spec.prepare if kind == "http" else aws.prepare
    with pytest.raises(ValidationError) as caught:
        prepare(config, value)
    return caught.value


def test_the_issue_s_signed_scan_of_the_jobs_table_is_refused_naming_sigv4() -> None:
    error = refused("http", SCAN_ATTACK)
    assert error.field == "target.http.auth.sigv4"
    assert "http_sigv4" in str(error)


@pytest.mark.parametrize("url", [
    "https://attacker.example/collect",               # not under any prefix
    API.replace("/prod/", "/admin/"),                 # the listed API, another stage
    API + "../admin/x",                               # a dot segment out of the prefix
    API + "%2e%2e/admin",                             # ... percent-encoded
    API.rstrip("/") + "x/",                           # /prodx is not under /prod/
    API.replace("https://", "http://"),               # another scheme
    API.replace(".com/", ".com:8443/"),               # another port
    "https://abc.execute-api.us-east-1.amazonaws.com.evil.example/prod/",
])
def test_sigv4_signs_only_under_a_listed_prefix(url: str) -> None:
    assert refused("http", {"url": url, "auth": {"sigv4": {"service": "execute-api"}}}
                   ).field == "target.http.auth.sigv4"


def test_a_listed_prefix_is_signed_for_its_service_only() -> None:
    payload, _ = http_spec.prepare(CONFIG, {"url": API + "orders?x=1", "method": "POST",
                                            "auth": {"sigv4": {"service": "execute-api"}}})
    assert payload["auth"] == {"sigv4": {"service": "execute-api", "region": None}}
    error = refused("http", {"url": API + "orders", "auth": {"sigv4": {"service": "dynamodb"}}})
    assert error.field == "target.http.auth.sigv4" and "only for execute-api" in str(error)
    pinned = TargetConfig.from_settings(SETTINGS.with_(targets={"http_sigv4": [
        {"url_prefix": API, "service": "execute-api", "region": "us-east-1"}]}))
    assert refused("http", {"url": API, "auth": {"sigv4": {
        "service": "execute-api", "region": "eu-west-1"}}}, pinned).field == \
        "target.http.auth.sigv4"


@pytest.mark.parametrize("url", [
    "http://dynamodb.us-east-1.amazonaws.com/",
    "https://sqs.eu-west-1.amazonaws.com/123456789012/lh-default-high",
    "https://dynamodb.cn-north-1.amazonaws.com.cn/",
    "https://dynamodb.us-east-1.api.aws/",
    "https://secretsmanager.us-east-1.amazonaws.com./",
    "https://SNS.US-EAST-1.AMAZONAWS.COM/",
    "https://abcdef.lambda-url.us-east-1.on.aws/",
    "https://abc.execute-api.us-east-1.amazonaws.com/other/",
])
def test_an_aws_endpoint_is_refused_as_an_http_target_even_unsigned(url: str) -> None:
    error = refused("http", {"url": url, "method": "POST", "body": {"TableName": "lh-jobs"}})
    assert error.field == "target.http.url" and "AWS service endpoint" in str(error)


def test_an_aws_endpoint_the_deployment_lists_may_be_called() -> None:
    http_spec.prepare(CONFIG, {"url": API + "orders"})  # under a sigv4 prefix, unsigned
    http_spec.prepare(CONFIG, {"url": "https://public-bucket.s3.amazonaws.com/a.json"})


def test_a_redirect_to_an_aws_endpoint_is_refused_like_a_submission() -> None:
    with pytest.raises(AddressRefused, match="AWS service endpoint"):
        _next_hop(CONFIG, "https://partner.example/a",
                  "http://dynamodb.us-east-1.amazonaws.com/")
    assert _next_hop(CONFIG, "https://partner.example/a", API + "x") == API + "x"


def test_without_a_targets_role_nothing_is_signed_and_no_aws_action_is_called() -> None:
    bare = TargetConfig.from_settings(SETTINGS.with_(targets_role_arn=None))
    error = refused("http", {"url": API, "auth": {"sigv4": {"service": "execute-api"}}}, bare)
    assert error.field == "target.http.auth.sigv4" and "no targets role" in str(error)
    error = refused("aws", {"service": "sns", "action": "Publish", "parameters": {
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:t", "Message": "m"}}, bare)
    assert error.field == "target.aws" and "no targets role" in str(error)


def test_the_issue_s_getitem_of_the_jobs_table_is_refused_naming_the_parameter() -> None:
    error = refused("aws", GETITEM_ATTACK)
    assert error.field == "target.aws.parameters.TableName"
    assert "arn:aws:dynamodb:us-east-1:123456789012:table/lh-jobs" in str(error)
    payload, _ = aws.prepare(CONFIG, {**GETITEM_ATTACK, "parameters": {
        **GETITEM_ATTACK["parameters"], "TableName": "orders"}})
    assert payload["parameters"]["TableName"] == "orders"


@pytest.mark.parametrize(("target", "field"), [
    # A wildcard grant still never reaches Leasehold's tables, by name or ARN, nor an index.
    ({"service": "dynamodb", "action": "Scan", "parameters": {"TableName": "lh-jobs"}},
     "target.aws.parameters.TableName"),
    ({"service": "dynamodb", "action": "Scan", "parameters": {
        "TableName": "arn:aws:dynamodb:eu-west-1:999999999999:table/lh-tenants",
        "IndexName": "by_tenant"}}, "target.aws.parameters.TableName"),
    ({"service": "dynamodb", "action": "TransactWriteItems", "parameters": {"TransactItems": [
        {"Put": {"TableName": "orders", "Item": {"id": {"S": "1"}}}},
        {"Delete": {"TableName": "lh-jobs", "Key": {"pk": {"S": "x"}}}}]}},
     "target.aws.parameters.TransactItems[1].Delete.TableName"),
    ({"service": "dynamodb", "action": "BatchGetItem", "parameters": {"RequestItems": {
        "lh-coordination": {"Keys": [{"pk": {"S": "x"}}]}}}},
     "target.aws.parameters.RequestItems.lh-coordination"),
    ({"service": "sqs", "action": "SendMessage", "parameters": {
        "QueueUrl": "https://sqs.us-east-1.amazonaws.com/123456789012/lh-default-high",
        "MessageBody": "{}"}}, "target.aws.parameters.QueueUrl"),
    ({"service": "events", "action": "PutEvents", "parameters": {"Entries": [
        {"Source": "x", "DetailType": "y", "Detail": "{}"},
        {"Source": "x", "DetailType": "y", "Detail": "{}", "EventBusName": "lh-events"}]}},
     "target.aws.parameters.Entries[1].EventBusName"),
    ({"service": "secretsmanager", "action": "GetSecretValue",
      "parameters": {"SecretId": "partner/api-key"}}, "target.aws.parameters.SecretId"),
    # Listed resources only: another account's topic is not this grant's.
    ({"service": "sns", "action": "Publish", "parameters": {
        "TopicArn": "arn:aws:sns:us-east-1:210987654321:orders", "Message": "m"}},
     "target.aws.parameters.TopicArn"),
    # A call that names none of its grant's resources (an SMS) is not one of them.
    ({"service": "sns", "action": "Publish", "parameters": {"PhoneNumber": "+15555550100",
                                                          "Message": "m"}},
     "target.aws.parameters"),
])
def test_an_aws_target_reaches_only_listed_resources_and_never_leasehold_s(
        target: dict[str, Any], field: str) -> None:
    assert refused("aws", target).field == field


def test_listed_resources_match_as_iam_patterns() -> None:
    aws.prepare(CONFIG, {"service": "sns", "action": "Publish", "parameters": {
        "TopicArn": "arn:aws:sns:us-east-1:123456789012:orders", "Message": "m"}})
    aws.prepare(CONFIG, {"service": "events", "action": "PutEvents", "parameters": {
        "Entries": [{"Source": "x", "DetailType": "y", "Detail": "{}"}]}})
    aws.prepare(CONFIG, {"service": "sts", "action": "GetCallerIdentity", "parameters": {}})


def test_the_session_policy_allows_the_named_resource_and_denies_leasehold_s() -> None:
    listed = json.loads(aws.session_policy(CONFIG, "dynamodb", "Scan", {"TableName": "orders"}))
    allow, deny = listed["Statement"]
    assert allow == {"Effect": "Allow", "Action": "dynamodb:Scan", "Resource": [ORDERS]}
    assert deny["Effect"] == "Deny" and deny["Action"] == "*"
    assert "arn:*:dynamodb:*:*:table/lh-jobs" in deny["Resource"]
    assert "arn:*:dynamodb:*:*:table/lh-jobs/*" in deny["Resource"]
    assert "arn:*:sqs:*:*:lh-*" in deny["Resource"]
    assert "arn:*:events:*:*:event-bus/lh-events" in deny["Resource"]
    # A check missed: the call names the jobs table, which its grant does not list; the
    # session may do nothing but what IAM would deny anyway.
    missed = json.loads(aws.session_policy(CONFIG, "dynamodb", "GetItem",
                                           GETITEM_ATTACK["parameters"]))
    assert [s["Effect"] for s in missed["Statement"]] == ["Deny"]


@pytest.mark.parametrize(("tenant", "job_id"), [
    ("acme", "01J9ZQ8K7X4M2N3P5R6S7T8V9W"),
    ("arn:aws:iam::123456789012:role/Some Role/with spaces", "01J9ZQ8K7X4M2N3P5R6S7T8V9W"),
    ("t" * 200, "j" * 100),
])
def test_the_session_name_carries_tenant_and_job_in_sts_s_charset_and_length(
        tenant: str, job_id: str) -> None:
    name = session_name(Who(tenant=tenant, job_id=job_id))
    assert 2 <= len(name) <= SESSION_NAME_LIMIT
    assert all(c.isalnum() or c in "_+=,.@-" for c in name)
    if len(job_id) < 40:
        assert name.endswith("@" + job_id) and tenant[:4].replace(":", "-") in name


def test_a_deployment_whose_own_resources_would_not_fit_a_session_policy_fails_at_synth() -> None:
    from leasehold.cdk.config import LeaseholdConfig
    origins = ["https://api.partner.example"]
    LeaseholdConfig(http_secrets={"partner-api-key": {
        "secret": "secretsmanager:partner/api-key", "origins": origins}}).validate()
    many = {f"s{i}": {"secret": f"secretsmanager:partners/{i:02d}/a-rather-long-secret-name",
                      "origins": origins} for i in range(30)}
    with pytest.raises(ValueError, match="name fewer http_secrets"):
        LeaseholdConfig(http_secrets=many).validate()
