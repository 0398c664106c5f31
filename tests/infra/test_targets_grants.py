"""The targets role (issue 43): it holds exactly the AWS actions the deployment lists, on
exactly their resources, and the reads of exactly the secrets it names, and nothing on
Leasehold's tables, queues or bus; only the worker of the pool that runs targets may assume
it, and that worker holds none of those grants itself. Synthesized once for the module
(``bundling="source"``), then read; cdk-nag and cfn-lint stay clean."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template
from cdk_nag import AwsSolutionsChecks, NagPack, ServerlessChecks
from cfnlint.api import lint_file
from cfnlint.config import ManualArgs

from leasehold.cdk import Leasehold
from leasehold.cdk.config import LeaseholdConfig, PoolConfig
from leasehold.targets.config import TargetConfig
from tests.infra.conftest import FEATURE_FLAGS, ROOT
from tests.infra.test_validators import CFN_LINT_IGNORED

pytestmark = pytest.mark.infra

TOPIC = "arn:aws:sns:eu-west-1:123456789012:orders"
QUEUE = "arn:aws:sqs:eu-west-1:123456789012:inbox"
TABLES = "arn:aws:dynamodb:*:*:table/*"  # a wildcard that would cover Leasehold's own
API = "https://abc.execute-api.eu-west-1.amazonaws.com/prod/"
CONFIG = LeaseholdConfig(
    prefix="lhtargets", bundling="source", task_modules=("examples.tasks",),
    code=(str(ROOT / "examples"),),
    pools=(PoolConfig(name="default"),
           PoolConfig(name="long", kind="ecs", image="public.ecr.aws/x/worker:1")),
    aws_targets=({"action": "sns:Publish", "resources": [TOPIC]},
                 {"action": "sqs:SendMessage", "resources": [QUEUE]},
                 {"action": "dynamodb:GetItem", "resources": [TABLES]}),
    http_secrets={"partner-api-key": {"secret": "secretsmanager:partner/api-key",
                                      "origins": ["https://api.partner.example"]},
                  "other": {"secret": "ssm:/partner/other",
                            "origins": ["https://api.partner.example"]}},
    http_sigv4=({"url_prefix": API, "service": "execute-api"},),
    http_hosts={"api.partner.example": {"concurrency": 4, "rate_per_second": 10}})
DESCRIPTION = Match.string_like_regexp("^Leasehold targets: ")
WORKER = "leasehold.handlers.worker.handler"


class Synth:
    def __init__(self, app: cdk.App, raw: dict[str, Any], path: Path) -> None:
        self.app = app
        self.raw = raw
        self.path = path
        self.template = Template.from_json(raw)

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.raw["Resources"].items() if r["Type"] == kind}

    def statements(self, role_id: str) -> list[dict[str, Any]]:
        return [s for policy in self.of_type("AWS::IAM::Policy").values()
                if {"Ref": role_id} in policy["Properties"]["Roles"]
                for s in policy["Properties"]["PolicyDocument"]["Statement"]]

    def targets_role(self) -> str:
        (found,) = self.template.find_resources("AWS::IAM::Role", {
            "Properties": {"Description": DESCRIPTION}})
        return str(found)

    def default_worker_role(self) -> str:
        (found,) = [r["Properties"]["Role"]["Fn::GetAtt"][0]
                    for r in self.of_type("AWS::Lambda::Function").values()
                    if r["Properties"].get("Handler") == WORKER
                    and r["Properties"]["Description"].endswith("pool default")]
        return str(found)


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("targets.out")), context=FEATURE_FLAGS)
    stack = cdk.Stack(app, "Targets")
    Leasehold(stack, "Jobs", config=CONFIG)
    assembly = app.synth()
    path = Path(assembly.directory) / stack.template_file
    yield Synth(app, json.loads(path.read_text()), path)


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return sorted(actions if isinstance(actions, list) else [actions])


def _leasehold_ids(synth: Synth) -> set[str]:
    """The logical ids of Leasehold's tables, queues and bus."""
    return {k for kind in ("AWS::DynamoDB::Table", "AWS::SQS::Queue", "AWS::Events::EventBus")
            for k in synth.of_type(kind)}


def test_the_targets_role_holds_exactly_the_listed_grants_and_secret_reads(
        synth: Synth) -> None:
    granted = {(tuple(_actions(s)), json.dumps(s["Resource"], sort_keys=True))
               for s in synth.statements(synth.targets_role())}
    assert granted == {
        (("sns:Publish",), json.dumps(TOPIC)),
        (("sqs:SendMessage",), json.dumps(QUEUE)),
        (("dynamodb:GetItem",), json.dumps(TABLES)),
        (("secretsmanager:GetSecretValue",), _here("secretsmanager",
                                                    "secret:partner/api-key-??????")),
        (("ssm:GetParameter",), _here("ssm", "parameter/partner/other")),
    }


def _here(service: str, resource: str) -> str:
    """An ARN in the stack's own partition, region and account, as CloudFormation joins it."""
    return json.dumps({"Fn::Join": ["", [
        "arn:", {"Ref": "AWS::Partition"}, f":{service}:", {"Ref": "AWS::Region"}, ":",
        {"Ref": "AWS::AccountId"}, f":{resource}"]]}, sort_keys=True)


def test_no_statement_of_the_targets_role_names_a_leasehold_table_queue_or_bus(
        synth: Synth) -> None:
    text = json.dumps(synth.statements(synth.targets_role()))
    for logical in _leasehold_ids(synth):
        assert f'"{logical}"' not in text, logical
    assert CONFIG.prefix not in text  # nor by name


def test_only_the_runner_s_worker_role_may_assume_the_targets_role(synth: Synth) -> None:
    worker = synth.default_worker_role()
    synth.template.has_resource_properties("AWS::IAM::Role", {
        "Description": DESCRIPTION,
        "AssumeRolePolicyDocument": {"Statement": [{
            "Action": "sts:AssumeRole", "Effect": "Allow",
            "Principal": {"AWS": {"Fn::GetAtt": [worker, "Arn"]}}}]}})
    assumes = [s for s in synth.statements(worker) if "sts:AssumeRole" in _actions(s)]
    assert assumes == [{"Action": "sts:AssumeRole", "Effect": "Allow",
                        "Resource": {"Fn::GetAtt": [synth.targets_role(), "Arn"]}}]
    # No other role may assume it.
    for role in synth.of_type("AWS::IAM::Role"):
        if role != worker:
            assert not any("sts:AssumeRole" in _actions(s) for s in synth.statements(role))


def test_no_worker_holds_the_target_grants_or_reads_the_target_secrets(synth: Synth) -> None:
    for role in synth.of_type("AWS::IAM::Role"):
        if role == synth.targets_role():
            continue
        for statement in synth.statements(role):
            resources = json.dumps(statement["Resource"])
            for listed in (TOPIC, QUEUE, TABLES, "partner/api-key", "partner/other"):
                assert listed not in resources, (role, statement)


def test_every_function_knows_the_targets_role(synth: Synth) -> None:
    role = {"Fn::GetAtt": [synth.targets_role(), "Arn"]}
    functions = synth.of_type("AWS::Lambda::Function")
    leasehold = [f for f in functions.values() if "Variables" in
                 f["Properties"].get("Environment", {}) and "LEASEHOLD_JOBS_TABLE" in
                 f["Properties"]["Environment"]["Variables"]]
    assert leasehold
    for function in leasehold:
        assert function["Properties"]["Environment"]["Variables"][
            "LEASEHOLD_TARGETS_ROLE_ARN"] == role
    synth.template.has_resource_properties("AWS::ECS::TaskDefinition", {
        "ContainerDefinitions": [Match.object_like({"Environment": Match.array_with([
            {"Name": "LEASEHOLD_TARGETS_ROLE_ARN", "Value": role}])})]})


def test_a_deployment_without_targets_that_need_aws_has_no_targets_role() -> None:
    stack = cdk.Stack(cdk.App(context=FEATURE_FLAGS), "Plain")
    Leasehold(stack, "Jobs", config=LeaseholdConfig(
        prefix="lhplain", bundling="source", task_modules=("examples.tasks",),
        code=(str(ROOT / "examples"),), http_hosts={"a.example": {"concurrency": 1}}))
    Template.from_stack(stack).resource_properties_count_is(
        "AWS::IAM::Role", {"Description": DESCRIPTION}, 0)


def _findings(pack: NagPack, app: cdk.App) -> list[str]:
    report = pack.validate_scope(app)
    return [f"{violation.rule_name} at {resource.construct_path}"
            for violation in report.violations for resource in violation.violating_resources]


def test_cdk_nag_and_cfn_lint_stay_clean(synth: Synth) -> None:
    assert _findings(AwsSolutionsChecks(), synth.app) == []
    assert _findings(ServerlessChecks(), synth.app) == []
    matches = lint_file(synth.path, config=ManualArgs(
        regions=["us-east-1", "eu-west-1"], ignore_checks=CFN_LINT_IGNORED))
    assert [str(match) for match in matches] == []


def test_the_deployment_s_target_settings_reach_the_functions_environment() -> None:
    env = CONFIG.settings().to_env()
    targets = json.loads(env["LEASEHOLD_TARGETS"])
    assert targets["aws_targets"][0] == {"action": "sns:Publish", "resources": [TOPIC]}
    assert targets["http_sigv4"] == [{"url_prefix": API, "service": "execute-api"}]
    assert targets["http_hosts"]["api.partner.example"]["concurrency"] == 4
    assert "LEASEHOLD_TARGETS" not in LeaseholdConfig().settings().to_env()
    assert TargetConfig.parse(targets).sigv4[0].service == "execute-api"
