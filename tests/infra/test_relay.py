"""Template assertions for the change-stream relay: its event source mapping on the jobs
table's stream, its DLQ and alarms, its role, and the stack publishing from the stream."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match

from leasehold.cdk import relay
from leasehold.cdk.monitoring import ITERATOR_AGE_ALARM_SECONDS
from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.infra


def _relay(synthesized: Synthesized) -> tuple[str, dict[str, Any]]:
    ((logical, function),) = [
        (logical, f) for logical, f in synthesized.resources("AWS::Lambda::Function").items()
        if f["Properties"]["Handler"] == relay.RELAY_HANDLER]
    return logical, function


def _jobs_table(synthesized: Synthesized, role: str = "jobs_table") -> str:
    name = getattr(synthesized.config.settings(), role)
    (logical,) = [logical for logical, t in synthesized.resources("AWS::DynamoDB::Table").items()
                  if t["Properties"]["TableName"] == name]
    return logical


def _stream_mapping(synthesized: Synthesized) -> dict[str, Any]:
    (mapping,) = [m["Properties"] for m in
                  synthesized.resources("AWS::Lambda::EventSourceMapping").values()
                  if m["Properties"]["EventSourceArn"] == {
                      "Fn::GetAtt": [_jobs_table(synthesized), "StreamArn"]}]
    return mapping


def _relay_dlq(synthesized: Synthesized) -> str:
    destination = _stream_mapping(synthesized)["DestinationConfig"]["OnFailure"]["Destination"]
    logical, attribute = destination["Fn::GetAtt"]
    assert attribute == "Arn"
    return str(logical)


def _relay_statements(synthesized: Synthesized) -> list[dict[str, Any]]:
    role = _relay(synthesized)[1]["Properties"]["Role"]["Fn::GetAtt"][0]
    found = []
    for policy in [*synthesized.resources("AWS::IAM::Policy").values(),
                   *synthesized.resources("AWS::IAM::ManagedPolicy").values()]:
        if {"Ref": role} in policy["Properties"].get("Roles", []):
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    assert found
    return found


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_the_relay_reads_the_jobs_stream_with_partial_batches_bisection_and_bounded_retries(
        synthesized: Synthesized) -> None:
    mapping = _stream_mapping(synthesized)
    assert mapping["FunctionName"] == {"Ref": _relay(synthesized)[0]}
    assert mapping["StartingPosition"] == "TRIM_HORIZON"
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["MaximumRetryAttempts"] == relay.RETRY_ATTEMPTS
    # Given up well before the stream's 24 h retention, so the DLQ's range is still readable.
    assert 0 < mapping["MaximumRecordAgeInSeconds"] <= 12 * 3600
    assert mapping["BatchSize"] == relay.BATCH_SIZE
    assert mapping["MaximumBatchingWindowInSeconds"] == 1
    # The table the stream belongs to is the jobs table, with both images in its records.
    table = synthesized.resources("AWS::DynamoDB::Table")[_jobs_table(synthesized)]
    assert table["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}


def test_a_batch_given_up_on_goes_to_an_encrypted_tls_only_dlq_that_alarms(
        synthesized: Synthesized) -> None:
    dlq = _relay_dlq(synthesized)
    queue = synthesized.resources("AWS::SQS::Queue")[dlq]["Properties"]
    assert queue["SqsManagedSseEnabled"] is True
    assert queue["MessageRetentionPeriod"] == 14 * 24 * 3600
    synthesized.template.has_resource_properties("AWS::SQS::QueuePolicy", {
        "Queues": [{"Ref": dlq}],
        "PolicyDocument": {"Statement": Match.array_with([Match.object_like({
            "Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}})])},
    })
    synthesized.template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "MetricName": "ApproximateNumberOfMessagesVisible", "Threshold": 1,
        "Dimensions": [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq, "QueueName"]}}],
    })


def test_the_relay_alarms_on_iterator_age_to_the_alarm_topic(synthesized: Synthesized) -> None:
    (topic,) = synthesized.resources("AWS::SNS::Topic")
    synthesized.template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "Namespace": "AWS/Lambda", "MetricName": "IteratorAge", "Statistic": "Maximum",
        "Dimensions": [{"Name": "FunctionName", "Value": {"Ref": _relay(synthesized)[0]}}],
        "Threshold": ITERATOR_AGE_ALARM_SECONDS * 1000,
        "AlarmActions": [{"Ref": topic}], "OKActions": [{"Ref": topic}],
    })
    (dashboard,) = synthesized.resources("AWS::CloudWatch::Dashboard").values()
    assert '"AWS/Lambda","IteratorAge","FunctionName","' in str(
        dashboard["Properties"]["DashboardBody"])


def test_the_relay_role_reads_only_the_jobs_stream_and_puts_only_on_the_bus(
        synthesized: Synthesized) -> None:
    ((bus, _),) = synthesized.resources("AWS::Events::EventBus").items()
    stream = {"Fn::GetAtt": [_jobs_table(synthesized), "StreamArn"]}
    dlq = {"Fn::GetAtt": [_relay_dlq(synthesized), "Arn"]}
    granted: dict[str, list[Any]] = {}
    for statement in _relay_statements(synthesized):
        assert statement["Effect"] == "Allow"
        for action in _listed(statement["Action"]):
            granted.setdefault(action, []).extend(_listed(statement["Resource"]))
    by_service: dict[str, set[str]] = {}
    for action in granted:
        by_service.setdefault(action.split(":")[0], set()).add(action)
    # The relay reads rows from the stream's images; of the jobs table it only reads
    # whether a removed row exists again. In the coordination table it finds and deletes
    # what features keep for a removed row.
    coordination = {"Fn::GetAtt": [_jobs_table(synthesized, "coordination_table"), "Arn"]}
    purge = {"dynamodb:Query", "dynamodb:BatchWriteItem"}
    assert by_service["dynamodb"] == set(relay.STREAM_READ_ACTIONS) | purge | {
        "dynamodb:BatchGetItem"}
    for action in relay.STREAM_READ_ACTIONS:
        assert granted[action] == [stream], action
    for action in purge:
        assert granted[action] == [coordination], action
    assert granted["dynamodb:BatchGetItem"] == [{"Fn::GetAtt": [_jobs_table(synthesized), "Arn"]}]
    assert by_service["events"] == {"events:PutEvents"}
    assert granted["events:PutEvents"] == [{"Fn::GetAtt": [bus, "Arn"]}]
    # The on-failure destination is sent to with the function's role, and the work queues
    # (the hand-off of jobs enqueue_item created): SendMessage only, on those queues only.
    # and the mapping reads its destination's attributes; nothing is ever received.
    assert by_service["sqs"] == {"sqs:SendMessage", "sqs:GetQueueAttributes",
                                 "sqs:GetQueueUrl"}
    assert granted["sqs:GetQueueAttributes"] == granted["sqs:GetQueueUrl"] == [dlq]
    work = [{"Fn::GetAtt": [name, "Arn"]} for name, queue in
            synthesized.resources("AWS::SQS::Queue").items()
            if "RedrivePolicy" in queue["Properties"]]
    assert work and dlq in granted["sqs:SendMessage"]
    assert all(queue in granted["sqs:SendMessage"] for queue in work)
    # Their key, to encrypt what it sends; besides, its own log group and X-Ray.
    assert set(by_service) == {"dynamodb", "events", "sqs", "kms", "logs", "xray"}


def test_every_function_and_ecs_worker_takes_its_events_from_the_stream(
        synthesized: Synthesized) -> None:
    """So the worker hot path makes no PutEvents: the relay publishes the committed rows."""
    functions = synthesized.resources("AWS::Lambda::Function").values()
    handlers = set()
    for function in functions:
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["LEASEHOLD_EVENTS_FROM"] == "stream", function["Properties"]["Handler"]
        handlers.add(function["Properties"]["Handler"].split(".")[-2])
    assert {"worker", "api", "ticker", "sweeper", "trigger", "relay"} <= handlers
    containers = [container for task in synthesized.resources("AWS::ECS::TaskDefinition").values()
                  for container in task["Properties"]["ContainerDefinitions"]]
    assert containers
    for container in containers:
        assert {"Name": "LEASEHOLD_EVENTS_FROM", "Value": "stream"} in container["Environment"]


def test_the_benchmarks_relay_cost_uses_the_deployed_batch_size_and_memory(
        synthesized: Synthesized) -> None:
    from bench import relay_cost

    assert relay_cost.BATCH_SIZE == relay.BATCH_SIZE
    (function,) = [f for f in synthesized.resources("AWS::Lambda::Function").values()
                   if f["Properties"]["Handler"].endswith("relay.handler")]
    assert function["Properties"]["MemorySize"] == relay_cost.RELAY_MEMORY_GB * 1024
