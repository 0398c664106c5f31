"""The pool that runs jobs with no code is granted exactly the AWS actions the deployment
lists, on exactly their resources, and reads exactly the secrets it names."""

from __future__ import annotations

import json
import os
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from leasehold.cdk.config import LeaseholdConfig
from leasehold.cdk.targets import grant_targets
from leasehold.targets.config import TargetConfig

os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
TOPIC = "arn:aws:sns:eu-west-1:123456789012:orders"
QUEUE = "arn:aws:sqs:eu-west-1:123456789012:inbox"
CONFIG = LeaseholdConfig(
    aws_targets=({"action": "sns:Publish", "resources": [TOPIC]},
                 {"action": "sqs:SendMessage", "resources": [QUEUE]}),
    http_secrets={"partner-api-key": {"secret": "secretsmanager:partner/api-key",
                                      "origins": ["https://api.partner.example"]},
                  "other": {"secret": "ssm:/partner/other",
                            "origins": ["https://api.partner.example"]}},
    http_hosts={"api.partner.example": {"concurrency": 4, "rate_per_second": 10}})


def statements() -> list[dict[str, Any]]:
    stack = cdk.Stack(cdk.App(), "T", env=cdk.Environment(account="123456789012",
                                                          region="eu-west-1"))
    fn = lambda_.Function(stack, "Worker", runtime=lambda_.Runtime.PYTHON_3_12,
                          handler="x.handler", code=lambda_.Code.from_inline("x"))
    grant_targets(fn, TargetConfig.parse(CONFIG.targets()))
    policies = Template.from_stack(stack).find_resources("AWS::IAM::Policy")
    return [s for p in policies.values() for s in p["Properties"]["PolicyDocument"]["Statement"]]


def partitioned(rest: str) -> str:
    return json.dumps({"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, rest]]},
                      sort_keys=True)


def test_exactly_the_listed_actions_on_exactly_their_resources_and_the_named_secrets() -> None:
    granted = {(s["Action"] if isinstance(s["Action"], str) else tuple(s["Action"]),
                json.dumps(s["Resource"], sort_keys=True)) for s in statements()}
    assert granted == {
        ("sns:Publish", json.dumps(TOPIC)),
        ("sqs:SendMessage", json.dumps(QUEUE)),
        ("secretsmanager:GetSecretValue",
         partitioned(":secretsmanager:eu-west-1:123456789012:secret:partner/api-key-??????")),
        ("ssm:GetParameter", partitioned(":ssm:eu-west-1:123456789012:parameter/partner/other")),
    }


def test_the_deployment_s_target_settings_reach_the_functions_environment() -> None:
    env = CONFIG.settings().to_env()
    targets = json.loads(env["LEASEHOLD_TARGETS"])
    assert targets["aws_targets"][0] == {"action": "sns:Publish", "resources": [TOPIC]}
    assert targets["http_hosts"]["api.partner.example"]["concurrency"] == 4
    assert "LEASEHOLD_TARGETS" not in LeaseholdConfig().settings().to_env()
