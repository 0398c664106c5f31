"""What only a real account would show (issue 12): each test names the failure it prevents."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match
from jsonschema import Draft4Validator
from pydantic import ValidationError

from leasehold.api.models import SubmitJob
from leasehold.cdk.config import LeaseholdConfig
from tests.infra.conftest import Synthesized
from tests.infra.test_template import _actions

pytestmark = pytest.mark.infra


def _role_statements(synthesized: Synthesized, role_logical: str) -> list[dict[str, Any]]:
    """Every statement of the policies attached to one role."""
    found = []
    for policy in synthesized.resources("AWS::IAM::Policy").values():
        roles = [ref.get("Ref") for ref in policy["Properties"].get("Roles", [])]
        if role_logical in roles:
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def _function_role(synthesized: Synthesized, handler: str) -> str:
    (role,) = [f["Properties"]["Role"]["Fn::GetAtt"][0]
               for f in synthesized.resources("AWS::Lambda::Function").values()
               if f["Properties"]["Handler"] == handler]
    return str(role)


def test_cloudwatch_alarms_may_publish_to_the_tls_only_alarm_topic(
        synthesized: Synthesized) -> None:
    """enforce_ssl's policy replaces SNS's default one: without an Allow, no alarm notifies."""
    (topic_logical,) = synthesized.resources("AWS::SNS::Topic")
    synthesized.template.has_resource_properties("AWS::SNS::TopicPolicy", {
        "Topics": [{"Ref": topic_logical}],
        "PolicyDocument": {"Statement": Match.array_with([Match.object_like({
            "Effect": "Allow",
            "Principal": {"Service": "cloudwatch.amazonaws.com"},
            "Action": "sns:Publish",
            "Resource": {"Ref": topic_logical},
            "Condition": {
                "StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}},
                "ArnLike": {"aws:SourceArn": {"Fn::Join": ["", Match.array_with([
                    Match.string_like_regexp(r":alarm:\*$")])]}},
            },
        })])},
    })


def _task_definition(synthesized: Synthesized, pool: str) -> dict[str, Any]:
    (task,) = [task for task in synthesized.resources("AWS::ECS::TaskDefinition").values()
               if task["Properties"]["ContainerDefinitions"][0]["Command"][-1] == pool]
    return task


def test_an_ecs_pool_may_pull_its_private_ecr_image(synthesized: Synthesized) -> None:
    task = _task_definition(synthesized, "long")
    execution_role = task["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
    statements = _role_statements(synthesized, execution_role)
    pulled = [s for s in statements if "ecr:BatchGetImage" in _actions(s)]
    assert pulled, "the execution role cannot pull the image"
    assert {"ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"} <= set(
        _actions(pulled[0]))
    assert "repository/leasehold" in json.dumps(pulled[0]["Resource"])
    assert any("ecr:GetAuthorizationToken" in _actions(s) for s in statements)
    (container,) = task["Properties"]["ContainerDefinitions"]
    image = json.dumps(container["Image"])
    assert "123456789012.dkr.ecr.eu-west-1." in image and "/leasehold:1.4" in image


def test_an_ecs_pool_may_pull_the_image_built_from_the_bundle(synthesized: Synthesized) -> None:
    task = _task_definition(synthesized, "built")
    execution_role = task["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0]
    statements = _role_statements(synthesized, execution_role)
    pulled = [s for s in statements if "ecr:BatchGetImage" in _actions(s)]
    assert pulled, "the execution role cannot pull the image"
    assert "container-assets" in json.dumps(pulled[0]["Resource"])
    assert any("ecr:GetAuthorizationToken" in _actions(s) for s in statements)


def test_the_api_function_may_read_the_queue_age_metric_for_stats(
        synthesized: Synthesized) -> None:
    role = _function_role(synthesized, "leasehold.handlers.api.handler")
    actions = {a for s in _role_statements(synthesized, role) for a in _actions(s)}
    assert "cloudwatch:GetMetricStatistics" in actions


def test_function_environments_name_no_queue_so_they_stay_small_with_many_pools(
        synthesized: Synthesized) -> None:
    """Lambda allows 4 KB of environment: a URL per queue in every function broke at ~6 pools."""
    queues = set(synthesized.resources("AWS::SQS::Queue"))
    for function in synthesized.resources("AWS::Lambda::Function").values():
        variables = function["Properties"]["Environment"]["Variables"]
        text = json.dumps(variables)
        assert not [q for q in queues if f'"{q}"' in text], function["Properties"]["Handler"]
        assert len(text) < 2048


def test_the_account_wide_api_gateway_logging_settings_outlive_the_stack(
        synthesized: Synthesized) -> None:
    (account,) = synthesized.resources("AWS::ApiGateway::Account").values()
    assert account["DeletionPolicy"] == "Retain"
    role = account["Properties"]["CloudWatchRoleArn"]["Fn::GetAtt"][0]
    assert synthesized.raw["Resources"][role]["DeletionPolicy"] == "Retain"


def test_ecs_scale_in_counts_in_flight_jobs(synthesized: Synthesized) -> None:
    alarms = [a["Properties"] for a in synthesized.resources("AWS::CloudWatch::Alarm").values()
              if "Metrics" in a["Properties"]]
    assert alarms
    for alarm in alarms:
        metrics = {m["Id"]: m for m in alarm["Metrics"]}
        expression = next(m["Expression"] for m in alarm["Metrics"] if "Expression" in m)
        in_flight = [i for i, m in metrics.items() if m.get("MetricStat", {}).get(
            "Metric", {}).get("MetricName") == "ApproximateNumberOfMessagesNotVisible"]
        assert len(in_flight) == 3
        assert all(i in expression for i in in_flight)


def test_an_ecs_worker_may_protect_its_own_task_from_scale_in(
        synthesized: Synthesized) -> None:
    task = _task_definition(synthesized, "long")
    role = task["Properties"]["TaskRoleArn"]["Fn::GetAtt"][0]
    statements = [s for s in _role_statements(synthesized, role)
                  if "ecs:UpdateTaskProtection" in _actions(s)]
    assert statements
    assert ":task/" in json.dumps(statements[0]["Resource"])


def test_waf_counts_rather_than_blocks_the_body_rules_job_payloads_trip(
        synthesized: Synthesized) -> None:
    (acl,) = synthesized.resources("AWS::WAFv2::WebACL").values()
    (common,) = [r for r in acl["Properties"]["Rules"]
                 if r["Name"] == "AWSManagedRulesCommonRuleSet"]
    overrides = common["Statement"]["ManagedRuleGroupStatement"]["RuleActionOverrides"]
    counted = {o["Name"] for o in overrides if o["ActionToUse"] == {"Count": {}}}
    assert {"CrossSiteScripting_BODY", "GenericRFI_BODY", "GenericLFI_BODY",
            "EC2MetaDataSSRF_BODY", "SizeRestrictions_BODY"} <= counted


def test_every_dlq_keeps_messages_longer_than_its_source(synthesized: Synthesized) -> None:
    """A redriven message keeps its enqueue time: an equal retention expires it early."""
    queues = synthesized.resources("AWS::SQS::Queue")
    checked = 0
    for queue in queues.values():
        redrive = queue["Properties"].get("RedrivePolicy")
        if not redrive:
            continue
        dlq = queues[redrive["deadLetterTargetArn"]["Fn::GetAtt"][0]]
        assert dlq["Properties"]["MessageRetentionPeriod"] > \
            queue["Properties"]["MessageRetentionPeriod"]
        checked += 1
    assert checked == 3 * len(synthesized.config.pools)


def test_queue_retention_must_leave_room_for_the_dlq() -> None:
    with pytest.raises(ValueError, match="queueRetentionDays"):
        LeaseholdConfig(queue_retention_days=14).validate()


SUBMISSIONS: list[Any] = [
    {"task": "echo"},
    {"task": "echo", "priority": None},
    {"task": "echo", "priority": "high"},
    {"task": "echo", "priority": "urgent"},
    {"task": "echo", "priority": 1},
    {"task": ""},
    {"task": "x" * 129},
    {"task": None},
    {"priority": "low"},
    {"task": "echo", "payload": {"url": "http://169.254.169.254/", "html": "<script>"}},
    [],
    "echo",
    {"target": {"http": {"url": "https://api.partner.example/hook"}}},
    {"task": None, "target": {"http": {"url": "https://api.partner.example/hook"}}},
    {"task": "echo", "target": {"http": {"url": "https://api.partner.example/hook"}}},
    {"task": "echo", "target": None},
    {"target": "https://api.partner.example/hook"},
    {"target": None},
]


@pytest.mark.parametrize("body", SUBMISSIONS, ids=lambda body: json.dumps(body)[:40])
def test_the_gateway_model_accepts_every_submission_the_api_model_accepts(
        synthesized: Synthesized, body: Any) -> None:
    """The two validators agree: whatever the API takes, the gateway lets through."""
    (model,) = [m["Properties"]["Schema"]
                for m in synthesized.resources("AWS::ApiGateway::Model").values()
                if m["Properties"].get("Name") == "SubmitJob"
                or "oneOf" in m["Properties"]["Schema"]]
    gateway_ok = Draft4Validator(model).is_valid(body)
    try:
        SubmitJob.model_validate(body)
        # And the API's rule the model leaves to the spec (core.spec.targeted, a 422 before
        # anything is written): a task or a target, never both.
        api_ok = (body.get("task") is not None) != (body.get("target") is not None)
    except ValidationError:
        api_ok = False
    if api_ok:
        assert gateway_ok, f"the gateway rejects {body!r}, which the API accepts"
    # What the gateway checks (task, target, priority), it checks exactly as the API does.
    checked = isinstance(body, dict) and set(body) <= {"task", "priority", "target"}
    if checked or not isinstance(body, dict):
        assert gateway_ok == api_ok, body
