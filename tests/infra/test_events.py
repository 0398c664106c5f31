"""Template assertions for the event bus: job events out, user events in to the triggers."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Match

from leasehold.cdk.monitoring import JOB_METRICS, LATENESS_METRIC, NAMESPACE, SERVICE
from leasehold.cdk.relay import RELAY_HANDLER
from leasehold.cdk.triggers import TRIGGER_HANDLER
from leasehold.core.jobs import Job, Transition
from leasehold.core.states import JobState
from leasehold.handlers.telemetry import metric_for
from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.infra

#: The trigger rule and the archive take every event but Leasehold's own job events.
USER_EVENTS = {"source": [{"anything-but": ["leasehold.job"]}]}


def _bus(synthesized: Synthesized) -> tuple[str, dict[str, Any]]:
    ((logical, bus),) = synthesized.resources("AWS::Events::EventBus").items()
    return logical, bus


def _role(synthesized: Synthesized, handler: str) -> str:
    return synthesized.resources("AWS::Lambda::Function")[_logical(synthesized, handler)][
        "Properties"]["Role"]["Fn::GetAtt"][0]


def _logical(synthesized: Synthesized, handler: str) -> str:
    return next(logical for logical, f in synthesized.resources("AWS::Lambda::Function").items()
                if f["Properties"]["Handler"] == handler)


def test_the_bus_is_named_as_the_functions_read_it_and_has_no_resource_policy(
        synthesized: Synthesized) -> None:
    _, bus = _bus(synthesized)
    assert bus["Properties"]["Name"] == synthesized.config.settings().event_bus == "lhtest-events"
    # No resource policy: only this account's principals with IAM permission put events.
    synthesized.template.resource_count_is("AWS::Events::EventBusPolicy", 0)
    assert "Policy" not in bus["Properties"]


def test_the_archive_keeps_the_user_events_on_the_bus(synthesized: Synthesized) -> None:
    logical, _ = _bus(synthesized)
    synthesized.template.has_resource_properties("AWS::Events::Archive", {
        "SourceArn": {"Fn::GetAtt": [logical, "Arn"]},
        "EventPattern": USER_EVENTS,
        "RetentionDays": synthesized.config.event_archive_days,
    })


def test_user_events_but_not_job_events_reach_the_trigger_with_retries_and_a_dlq(
        synthesized: Synthesized) -> None:
    bus, _ = _bus(synthesized)
    trigger = _logical(synthesized, TRIGGER_HANDLER)
    rules = [r["Properties"] for r in synthesized.resources("AWS::Events::Rule").values()
             if r["Properties"].get("EventBusName") == {"Ref": bus}]
    assert len(rules) == 1
    (rule,) = rules
    assert rule["EventPattern"] == USER_EVENTS
    assert rule["State"] == "ENABLED"
    (target,) = rule["Targets"]
    assert target["Arn"] == {"Fn::GetAtt": [trigger, "Arn"]}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 10,
                                     "MaximumEventAgeInSeconds": 6 * 3600}
    dlq = target["DeadLetterConfig"]["Arn"]["Fn::GetAtt"][0]
    assert synthesized.resources("AWS::SQS::Queue")[dlq]["Properties"][
        "SqsManagedSseEnabled"] is True
    # A failed run is retried by Lambda (a redelivery creates no second job), then recorded in
    # the same DLQ with its error.
    synthesized.template.has_resource_properties("AWS::Lambda::EventInvokeConfig", {
        "FunctionName": {"Ref": trigger}, "MaximumRetryAttempts": 2,
        "MaximumEventAgeInSeconds": 6 * 3600,
        "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": [dlq, "Arn"]}}},
    })
    synthesized.template.has_resource_properties("AWS::Lambda::Permission", {
        "Action": "lambda:InvokeFunction", "Principal": "events.amazonaws.com",
        "FunctionName": {"Fn::GetAtt": [trigger, "Arn"]},
        "SourceArn": Match.object_like({"Fn::GetAtt": Match.array_with(["Arn"])}),
    })


def test_only_the_relay_may_put_events_and_only_on_the_bus(synthesized: Synthesized) -> None:
    """Job state events come from the change stream: no worker, API, ticker or task role
    may publish (they would be the inline publisher the stream replaces)."""
    bus, _ = _bus(synthesized)
    bus_arn = {"Fn::GetAtt": [bus, "Arn"]}
    name = synthesized.config.settings().event_bus
    functions = synthesized.resources("AWS::Lambda::Function")
    task_definitions = synthesized.resources("AWS::ECS::TaskDefinition")
    assert task_definitions  # the test config has an ECS pool
    for function in functions.values():
        assert function["Properties"]["Environment"]["Variables"]["LEASEHOLD_EVENT_BUS"] == name
    for task in task_definitions.values():
        for container in task["Properties"]["ContainerDefinitions"]:
            assert {"Name": "LEASEHOLD_EVENT_BUS", "Value": name} in container["Environment"]
    publishers = set()
    # CDK moves statements past the inline size limit into a managed "overflow" policy.
    for policy in [*synthesized.resources("AWS::IAM::Policy").values(),
                   *synthesized.resources("AWS::IAM::ManagedPolicy").values()]:
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = statement["Action"]
            if "events:PutEvents" in (actions if isinstance(actions, list) else [actions]):
                assert statement["Resource"] == bus_arn
                assert statement["Effect"] == "Allow"
                publishers |= {role["Ref"] for role in policy["Properties"]["Roles"]}
    assert publishers == {_role(synthesized, RELAY_HANDLER)}


def _job(state: JobState, actor: str) -> Job:
    return Job(job_id="j", tenant="t", task="x", payload_json="null", pool="default",
               priority="normal", state=state, epoch=1, run_at=1_000, started_at=1_500,
               history=(Transition(0, "", state.value, actor),))


def test_the_dashboard_and_alarms_chart_exactly_the_metrics_the_functions_emit(
        synthesized: Synthesized) -> None:
    emitted = {found[0] for source in (None, *JobState) for target in JobState
               for actor in ("sweeper", "worker-1")
               if (found := metric_for(_job(target, actor), source)) is not None}
    assert emitted == {*JOB_METRICS, LATENESS_METRIC}
    (dashboard,) = synthesized.resources("AWS::CloudWatch::Dashboard").values()
    body = str(dashboard["Properties"]["DashboardBody"])
    for metric in emitted:
        assert f'["{NAMESPACE}","{metric}","service","{SERVICE}"' in body, metric
    synthesized.template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "Namespace": NAMESPACE, "MetricName": "LeasesExpired",
        "Dimensions": [{"Name": "service", "Value": SERVICE}],
    })
    for function in synthesized.resources("AWS::Lambda::Function").values():
        variables = function["Properties"]["Environment"]["Variables"]
        assert variables["POWERTOOLS_METRICS_NAMESPACE"] == NAMESPACE
        assert variables["POWERTOOLS_SERVICE_NAME"] == SERVICE


def test_the_trigger_dead_letter_queue_and_errors_alarm(synthesized: Synthesized) -> None:
    trigger = _logical(synthesized, TRIGGER_HANDLER)
    synthesized.template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "Namespace": "AWS/Lambda", "MetricName": "Errors",
        "Dimensions": [{"Name": "FunctionName", "Value": {"Ref": trigger}}],
    })


def test_every_function_publishes_the_terminal_states_by_default(
        synthesized: Synthesized) -> None:
    """The stack passes the ``events`` context value (default ``terminal``) to every function
    that changes job state, next to the bus it publishes to."""
    assert synthesized.config.events == "terminal"
    for function in synthesized.resources("AWS::Lambda::Function").values():
        variables = function["Properties"]["Environment"]["Variables"]
        if "LEASEHOLD_EVENT_BUS" in variables:
            assert variables["LEASEHOLD_PUBLISH"] == "terminal", function["Properties"]["Handler"]
