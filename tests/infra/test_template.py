"""Template assertions on the properties that make the stack correct and secure."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match

from leasehold.settings import PRIORITIES
from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.infra

HANDLERS = {
    "leasehold.handlers.worker.handler", "leasehold.handlers.ticker.handler",
    "leasehold.handlers.sweeper.handler", "leasehold.handlers.api.handler",
    "leasehold.handlers.trigger.handler", "leasehold.handlers.relay.handler",
}


def _statements(synthesized: Synthesized) -> list[tuple[str, dict[str, Any]]]:
    """Every IAM statement in the template, with the logical id of the policy holding it."""
    found = []
    for logical, policy in synthesized.resources("AWS::IAM::Policy").items():
        found += [(logical, s) for s in policy["Properties"]["PolicyDocument"]["Statement"]]
    for logical, policy in synthesized.resources("AWS::IAM::ManagedPolicy").items():
        found += [(logical, s) for s in policy["Properties"]["PolicyDocument"]["Statement"]]
    for logical, role in synthesized.resources("AWS::IAM::Role").items():
        for inline in role["Properties"].get("Policies", []):
            found += [(logical, s) for s in inline["PolicyDocument"]["Statement"]]
    return found


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


def test_functions_run_python_312_on_arm64_with_tracing_and_json_logs(
        synthesized: Synthesized) -> None:
    functions = synthesized.resources("AWS::Lambda::Function").values()
    assert {f["Properties"]["Handler"] for f in functions} == HANDLERS
    for function in functions:
        props = function["Properties"]
        assert props["Runtime"] == "python3.12"
        assert props["Architectures"] == ["arm64"]
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["LoggingConfig"]["LogFormat"] == "JSON"
        assert "LogGroup" in props["LoggingConfig"]


def test_each_function_has_its_own_role(synthesized: Synthesized) -> None:
    roles = [f["Properties"]["Role"]["Fn::GetAtt"][0]
             for f in synthesized.resources("AWS::Lambda::Function").values()]
    assert len(roles) == len(set(roles)) == len(HANDLERS)


def test_no_policy_grants_a_wildcard_action(synthesized: Synthesized) -> None:
    statements = _statements(synthesized)
    assert statements
    wildcards = [(logical, action) for logical, s in statements for action in _actions(s)
                 if "*" in action]
    assert wildcards == []


def test_only_the_api_gateway_logging_role_uses_an_aws_managed_policy(
        synthesized: Synthesized) -> None:
    managed = {logical: role["Properties"]["ManagedPolicyArns"]
               for logical, role in synthesized.resources("AWS::IAM::Role").items()
               if role["Properties"].get("ManagedPolicyArns")}
    assert len(managed) == 1
    (arns,) = managed.values()
    assert "AmazonAPIGatewayPushToCloudWatchLogs" in str(arns)


def test_a_worker_consumes_only_its_own_pools_queues(synthesized: Synthesized) -> None:
    queues = synthesized.resources("AWS::SQS::Queue")
    worker_role = next(
        f["Properties"]["Role"]["Fn::GetAtt"][0]
        for f in synthesized.resources("AWS::Lambda::Function").values()
        if f["Properties"]["Handler"] == "leasehold.handlers.worker.handler")
    received: set[str] = set()
    for policy in synthesized.resources("AWS::IAM::Policy").values():
        if {"Ref": worker_role} not in policy["Properties"]["Roles"]:
            continue
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if "sqs:ReceiveMessage" in _actions(statement):
                resources = statement["Resource"]
                resources = resources if isinstance(resources, list) else [resources]
                received |= {queues[r["Fn::GetAtt"][0]]["Properties"]["QueueName"]
                             for r in resources}
    assert received == {f"lhtest-default-{priority}" for priority in PRIORITIES}


def test_worker_event_sources_report_partial_batch_failures_with_concurrency_per_priority(
        synthesized: Synthesized) -> None:
    pool = synthesized.config.pool("default")
    queues = synthesized.resources("AWS::SQS::Queue")
    seen = {}
    for mapping in synthesized.resources("AWS::Lambda::EventSourceMapping").values():
        props = mapping["Properties"]
        if props["EventSourceArn"]["Fn::GetAtt"][0] not in queues:
            continue  # the relay's stream (tests/infra/test_relay.py)
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert props["BatchSize"] == pool.batch_size
        name = queues[props["EventSourceArn"]["Fn::GetAtt"][0]]["Properties"]["QueueName"]
        seen[name] = props["ScalingConfig"]["MaximumConcurrency"]
    assert seen == {f"lhtest-default-{p}": pool.concurrency[p] for p in PRIORITIES}


def test_ticker_and_sweeper_run_every_minute_with_retries_and_a_dead_letter_queue(
        synthesized: Synthesized) -> None:
    rules = [rule for rule in synthesized.resources("AWS::Events::Rule").values()
             if "ScheduleExpression" in rule["Properties"]]
    assert len(rules) == 2
    functions = synthesized.resources("AWS::Lambda::Function")
    targeted = set()
    for rule in rules:
        props = rule["Properties"]
        assert props["ScheduleExpression"] == "rate(1 minute)"
        assert props["State"] == "ENABLED"
        (target,) = props["Targets"]
        assert target["RetryPolicy"] == {"MaximumRetryAttempts": 2,
                                         "MaximumEventAgeInSeconds": 300}
        assert "Fn::GetAtt" in target["DeadLetterConfig"]["Arn"]
        targeted.add(functions[target["Arn"]["Fn::GetAtt"][0]]["Properties"]["Handler"])
    assert targeted == {"leasehold.handlers.ticker.handler", "leasehold.handlers.sweeper.handler"}
    # A failed run is not retried by Lambda (it would overlap the next tick) but recorded.
    for target in targeted:
        logical = next(logical for logical, f in functions.items()
                       if f["Properties"]["Handler"] == target)
        synthesized.template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {
            "FunctionName": {"Ref": logical}, "MaximumRetryAttempts": 0,
            "DestinationConfig": {"OnFailure": {"Destination": Match.any_value()}},
        })


def test_every_api_method_requires_sigv4_and_a_request_validator(
        synthesized: Synthesized) -> None:
    methods = synthesized.resources("AWS::ApiGateway::Method").values()
    assert methods
    for method in methods:
        assert method["Properties"]["AuthorizationType"] == "AWS_IAM"
        assert "RequestValidatorId" in method["Properties"]
    synthesized.template.has_resource_properties("AWS::ApiGateway::RequestValidator", {
        "ValidateRequestBody": True, "ValidateRequestParameters": True})
    synthesized.template.has_resource_properties("AWS::ApiGateway::Method", {
        "HttpMethod": "POST",
        "RequestModels": {"application/json": Match.any_value()},
    })
    synthesized.template.has_resource_properties("AWS::ApiGateway::Model", {
        "ContentType": "application/json",
        "Schema": Match.object_like({"oneOf": [
            {"required": ["task"], "properties": {"task": {"type": "string"}}},
            {"required": ["target"], "properties": {"target": {"type": "object"}}}]}),
    })


def test_api_stage_logs_access_traces_and_throttles(synthesized: Synthesized) -> None:
    synthesized.template.has_resource_properties("AWS::ApiGateway::Stage", {
        "StageName": "v1",
        "TracingEnabled": True,
        "AccessLogSetting": {"DestinationArn": Match.any_value(),
                             "Format": Match.string_like_regexp(r"requestId")},
        "MethodSettings": Match.array_with([Match.object_like({
            "HttpMethod": "*", "ResourcePath": "/*",
            "ThrottlingRateLimit": synthesized.config.throttle_rate,
            "ThrottlingBurstLimit": synthesized.config.throttle_burst,
            "DataTraceEnabled": False, "LoggingLevel": "ERROR", "MetricsEnabled": True,
        })]),
    })


def test_a_waf_web_acl_protects_the_api_stage(synthesized: Synthesized) -> None:
    synthesized.template.has_resource_properties("AWS::WAFv2::WebACL", {
        "Scope": "REGIONAL",
        "Rules": Match.array_with([Match.object_like({
            "Statement": {"RateBasedStatement": Match.object_like({"AggregateKeyType": "IP"})},
        })]),
    })
    synthesized.template.resource_count_is("AWS::WAFv2::WebACLAssociation", 1)


def test_every_dead_letter_queue_alarms_to_the_encrypted_sns_topic(
        synthesized: Synthesized) -> None:
    (topic_logical, topic), = synthesized.resources("AWS::SNS::Topic").items()
    assert "KmsMasterKeyId" in topic["Properties"]
    synthesized.template.has_resource_properties("AWS::SNS::Subscription", {
        "Protocol": "email", "Endpoint": "oncall@example.com"})
    queues = synthesized.resources("AWS::SQS::Queue")
    dlqs = {logical for logical, q in queues.items()
            if not q["Properties"].get("RedrivePolicy")}
    scaling = set(synthesized.resources("AWS::ApplicationAutoScaling::ScalingPolicy"))
    alarmed = set()
    for alarm in synthesized.resources("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        if {action["Ref"] for action in props["AlarmActions"]} <= scaling:
            continue  # an ECS scaling trigger, not an operator alarm
        assert props["AlarmActions"] == [{"Ref": topic_logical}]
        assert props["OKActions"] == [{"Ref": topic_logical}]
        if props.get("MetricName") == "ApproximateNumberOfMessagesVisible":
            (dimension,) = props["Dimensions"]
            alarmed.add(dimension["Value"]["Fn::GetAtt"][0])
            assert props["Threshold"] == 1
    assert alarmed == dlqs


def test_the_ticker_alarms_when_it_stops_running(synthesized: Synthesized) -> None:
    synthesized.template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "Invocations", "Namespace": "AWS/Lambda",
        "ComparisonOperator": "LessThanThreshold", "TreatMissingData": "breaching",
    })


def test_the_dashboard_shows_queue_age_dlq_depth_leases_lateness_and_api_errors(
        synthesized: Synthesized) -> None:
    (dashboard,) = synthesized.resources("AWS::CloudWatch::Dashboard").values()
    body = str(dashboard["Properties"]["DashboardBody"])
    for metric in ("ApproximateAgeOfOldestMessage", "ApproximateNumberOfMessagesVisible",
                   "LeasesExpired", "JobsRetried", "ScheduleLatenessMs", "4XXError",
                   "5XXError", "NumberOfMessagesDeleted"):
        assert metric in body, metric


def test_an_ecs_pool_runs_the_polling_worker_on_arm64_scaled_on_queue_depth(
        synthesized: Synthesized) -> None:
    synthesized.template.has_resource_properties("AWS::ECS::TaskDefinition", {
        "RuntimePlatform": {"CpuArchitecture": "ARM64", "OperatingSystemFamily": "LINUX"},
        "ContainerDefinitions": [Match.object_like({
            "Command": ["leasehold", "worker", "--pool", "long"],
        })],
    })
    synthesized.template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {"MinCapacity": 0, "MaxCapacity": 4, "ScalableDimension": "ecs:service:DesiredCount"})
    synthesized.template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "Metrics": Match.array_with([Match.object_like({
            "Expression": Match.string_like_regexp(r"^high \+ normal \+ low")})]),
    })
    # The ECS pool has no Lambda: only the default pool's queues feed event source mappings
    # (and the jobs table's stream feeds the relay).
    synthesized.template.resource_count_is("AWS::Lambda::EventSourceMapping", 3 + 1)


def test_outputs_give_the_api_url_and_the_names_the_cli_needs(
        synthesized: Synthesized) -> None:
    outputs = synthesized.raw["Outputs"]
    for name in ("ApiUrl", "QueueUrls", "JobsTable", "QueuePrefix", "DashboardName"):
        assert name in outputs


def test_the_rest_api_is_the_default_and_names_its_execute_api_resource(
        synthesized: Synthesized) -> None:
    synthesized.template.resource_count_is("AWS::ApiGateway::RestApi", 1)
    synthesized.template.resource_count_is("AWS::ApiGatewayV2::Api", 0)
    api = synthesized.stack.leasehold.api
    arn = synthesized.stack.resolve(api.execute_api_arn("POST", "/jobs"))
    assert "/v1/POST/jobs" in json.dumps(arn)
