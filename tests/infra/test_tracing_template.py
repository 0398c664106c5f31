"""``LeaseholdConfig(tracing=...)`` in the template (issue 35): the ADOT layer and its wrapper
with ``otel``, Lambda's active tracing with ``xray`` (the default), neither with ``off``."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Match, Template

from leasehold.cdk.config import LeaseholdConfig
from leasehold.cdk.tracing import apply_tracing


def _function_template(mode: str) -> dict[str, Any]:
    from leasehold.cdk.functions import LeaseholdFunction

    stack = cdk.Stack(cdk.App(), "Tracing", env=cdk.Environment(region="eu-west-1"))
    LeaseholdFunction(stack, "Worker", handler="leasehold.handlers.worker.handler",
                      code=lambda_.Code.from_inline("pass"), environment={}, memory_mb=256,
                      timeout_seconds=60, log_retention=logs.RetentionDays.ONE_WEEK,
                      description="a worker")
    apply_tracing(stack, mode)
    [function] = Template.from_stack(stack).find_resources("AWS::Lambda::Function").values()
    return dict(function["Properties"])


def test_otel_adds_the_adot_python_layer_its_wrapper_and_keeps_xray() -> None:
    props = _function_template("otel")
    [layer] = props["Layers"]
    assert "aws-otel-python-arm64" in layer and ":eu-west-1:" in layer
    variables = props["Environment"]["Variables"]
    assert variables["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/otel-instrument"
    assert variables["OTEL_SERVICE_NAME"] == "Worker"
    assert props["TracingConfig"] == {"Mode": "Active"}


def test_xray_is_active_tracing_without_a_layer() -> None:
    props = _function_template("xray")
    assert props["TracingConfig"] == {"Mode": "Active"} and "Layers" not in props
    assert "AWS_LAMBDA_EXEC_WRAPPER" not in props.get("Environment", {}).get("Variables", {})


def test_off_has_neither() -> None:
    props = _function_template("off")
    assert "TracingConfig" not in props and "Layers" not in props


def test_an_unknown_mode_is_refused_before_synthesis() -> None:
    with pytest.raises(ValueError, match="tracing must be"):
        LeaseholdConfig(tracing="jaeger").validate()
    assert LeaseholdConfig.from_context({"tracing": "otel"}.get).tracing == "otel"


def test_the_default_deployment_keeps_active_tracing(synthesized: Any) -> None:
    synthesized.template.has_resource_properties("AWS::Lambda::Function", {
        "TracingConfig": {"Mode": "Active"}, "Layers": Match.absent()})
