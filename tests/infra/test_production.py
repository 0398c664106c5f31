"""An application's production deployment, the CDK way (examples/adoption/production.py):
its pools get grants to its own resources, plain settings, secrets (by reference only) and
layers, and run in its VPC; its own role calls the API and enqueues; the tables are under the
stack's key. Synthesized once for the module (``bundling="source"``), then read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from cdk_nag import AwsSolutionsChecks, NagPack, ServerlessChecks
from cfnlint.api import lint_file
from cfnlint.config import ManualArgs

from examples.adoption.production import LAYER_ARN, PARAMETER_KEY_ARN, production
from leasehold.cdk import Leasehold, LeaseholdConfig, PoolConfig
from leasehold.settings import Settings
from tests.infra.conftest import FEATURE_FLAGS
from tests.infra.test_validators import CFN_LINT_IGNORED

pytestmark = pytest.mark.infra

WORKER = "leasehold.handlers.worker.handler"


@dataclass(frozen=True)
class App:
    app: cdk.App
    jobs: Leasehold
    raw: dict[str, Any]
    template_path: Path

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.raw["Resources"]

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        return {k: r for k, r in self.resources.items() if r["Type"] == kind}

    def logical_id(self, construct: Any) -> str:
        stack = cdk.Stack.of(construct)
        return str(stack.resolve(stack.get_logical_id(construct.node.default_child)))

    def statements(self, role_id: str) -> list[dict[str, Any]]:
        """Every statement of the inline policies attached to one role."""
        found: list[dict[str, Any]] = []
        for policy in self.of_type("AWS::IAM::Policy").values():
            if {"Ref": role_id} in policy["Properties"]["Roles"]:
                found += policy["Properties"]["PolicyDocument"]["Statement"]
        return found

    def worker(self, pool: str) -> dict[str, Any]:
        (found,) = [r["Properties"] for r in self.of_type("AWS::Lambda::Function").values()
                    if r["Properties"].get("Handler") == WORKER
                    and r["Properties"]["Description"].endswith(f"pool {pool}")]
        return found


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    outdir = tmp_path_factory.mktemp("production.out")
    app = cdk.App(outdir=str(outdir), context=FEATURE_FLAGS)
    stack = cdk.Stack(app, "GreeterProduction")
    jobs = production(stack, config=LeaseholdConfig(
        prefix="greeter", table_encryption="customer-managed", bundling="source"))
    assembly = app.synth()
    path = Path(assembly.directory) / stack.template_file
    yield App(app=app, jobs=jobs, raw=json.loads(path.read_text()), template_path=path)


def _render(value: Any) -> Any:
    """An intrinsic as text: ``${AWS::Region}``, ``${Logical}``, ``${Logical.Arn}``."""
    if isinstance(value, dict) and len(value) == 1:
        (kind, argument), = value.items()
        if kind == "Fn::Join":
            return argument[0].join(str(_render(part)) for part in argument[1])
        if kind == "Ref":
            return "${" + argument + "}"
        if kind == "Fn::GetAtt":
            return "${" + ".".join(argument) + "}"
    if isinstance(value, list):
        return [_render(item) for item in value]
    return value


def _resources(statement: dict[str, Any]) -> list[str]:
    resources = statement["Resource"]
    return sorted(map(str, _render(resources if isinstance(resources, list) else [resources])))


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return sorted(actions if isinstance(actions, list) else [actions])


def _role_of(function: dict[str, Any]) -> str:
    return str(function["Role"]["Fn::GetAtt"][0])


ARN = "arn:${AWS::Partition}"
API_KEY_ARN = (f"{ARN}:secretsmanager:${{AWS::Region}}:${{AWS::AccountId}}:"
               "secret:greeter/api-key-??????")
DB_PASSWORD_ARN = f"{ARN}:ssm:${{AWS::Region}}:${{AWS::AccountId}}:parameter/greeter/db-password"


def _secret_statements(statements: list[dict[str, Any]]) -> list[tuple[list[str], list[str]]]:
    return sorted((_actions(s), _resources(s)) for s in statements
                  if any(a.startswith(("secretsmanager:", "ssm:")) for a in _actions(s))
                  or PARAMETER_KEY_ARN in _resources(s))


def test_each_pool_role_may_read_exactly_its_own_secrets(synthesized: App) -> None:
    default = synthesized.statements(_role_of(synthesized.worker("default")))
    assert _secret_statements(default) == [
        (["kms:Decrypt"], [PARAMETER_KEY_ARN]),
        (["secretsmanager:GetSecretValue"], [API_KEY_ARN]),
        (["ssm:GetParameter"], [DB_PASSWORD_ARN]),
    ]
    (decrypt,) = [s for s in default if PARAMETER_KEY_ARN in _resources(s)]
    # The key is usable through the pool's two stores only, never directly.
    assert _render(decrypt["Condition"]["StringEquals"]["kms:ViaService"]) == [
        "secretsmanager.${AWS::Region}.${AWS::URLSuffix}", "ssm.${AWS::Region}.${AWS::URLSuffix}"]
    batch = synthesized.statements(synthesized.logical_id(synthesized.jobs.pool("batch").role))
    assert _secret_statements(batch) == [(["secretsmanager:GetSecretValue"], [API_KEY_ARN])]
    # No other role of the stack may read a secret or a parameter.
    pools = {_role_of(synthesized.worker("default")),
             synthesized.logical_id(synthesized.jobs.pool("batch").role)}
    for role_id in synthesized.of_type("AWS::IAM::Role"):
        if role_id not in pools:
            assert _secret_statements(synthesized.statements(role_id)) == [], role_id


def test_the_application_grants_its_pools_access_to_its_own_resources(synthesized: App) -> None:
    orders = synthesized.logical_id(synthesized.app.node.find_child(
        "GreeterProduction").node.find_child("Orders"))
    default = synthesized.statements(_role_of(synthesized.worker("default")))
    on_orders = [s for s in default if f"${{{orders}.Arn}}" in _resources(s)]
    assert on_orders and "dynamodb:PutItem" in _actions(on_orders[0])
    assert ["ses:SendEmail"] in [_actions(s) for s in default]
    batch = synthesized.statements(synthesized.logical_id(synthesized.jobs.pool("batch").role))
    assert [f"{ARN}:s3:::greeter-reports", f"{ARN}:s3:::greeter-reports/*"] in [
        _resources(s) for s in batch]
    # ... and nobody else of Leasehold's.
    api = synthesized.statements(_role_of(synthesized.resources[
        synthesized.logical_id(synthesized.jobs.api_function)]["Properties"]))
    assert not [s for s in api if f"${{{orders}.Arn}}" in _resources(s)]


def test_an_unknown_pool_is_refused_naming_the_pools(synthesized: App) -> None:
    with pytest.raises(ValueError, match=r"no pool 'gpu' in this deployment "
                                         r"\(pools: default, batch\)"):
        synthesized.jobs.pool("gpu")


def test_plain_settings_and_secret_references_reach_only_their_pool_never_a_value(
        synthesized: App) -> None:
    default = synthesized.worker("default")["Environment"]["Variables"]
    assert default["GREETING_STYLE"] == "formal"
    assert json.loads(default["LEASEHOLD_SECRETS"]) == {
        "API_KEY": "greeter/api-key", "DB_PASSWORD": "ssm:/greeter/db-password"}
    (task,) = synthesized.of_type("AWS::ECS::TaskDefinition").values()
    container = {e["Name"]: e["Value"]
                 for e in task["Properties"]["ContainerDefinitions"][0]["Environment"]}
    assert container["REPORTS_BUCKET"] == "greeter-reports"
    assert json.loads(container["LEASEHOLD_SECRETS"]) == {"API_KEY": "greeter/api-key"}
    # The variables themselves are set by the worker at start: no function, container or
    # resource of the template carries a value for them, or holds a secret.
    text = json.dumps(synthesized.raw)
    for name in ("API_KEY", "DB_PASSWORD"):
        assert f'"{name}":' not in text.replace('\\"', '"').replace(
            default["LEASEHOLD_SECRETS"], "").replace(container["LEASEHOLD_SECRETS"], "")
    assert not synthesized.of_type("AWS::SecretsManager::Secret")
    assert not synthesized.of_type("AWS::SSM::Parameter")
    assert "GREETING_STYLE" not in synthesized.resources[synthesized.logical_id(
        synthesized.jobs.api_function)]["Properties"]["Environment"]["Variables"]


def test_the_vpc_reaches_the_workers_and_the_fargate_service_alone(synthesized: App) -> None:
    subnets = sorted(k for k, r in synthesized.of_type("AWS::EC2::Subnet").items()
                     if "private" in k)
    assert len(subnets) == 2
    group = [k for k in synthesized.of_type("AWS::EC2::SecurityGroup")
             if k.startswith("DatabaseClients")]
    vpc_config = synthesized.worker("default")["VpcConfig"]
    assert sorted(ref["Ref"] for ref in vpc_config["SubnetIds"]) == subnets
    assert [g["Fn::GetAtt"][0] for g in vpc_config["SecurityGroupIds"]] == group
    (service,) = synthesized.of_type("AWS::ECS::Service").values()
    network = service["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"]
    assert sorted(ref["Ref"] for ref in network["Subnets"]) == subnets
    assert [g["Fn::GetAtt"][0] for g in network["SecurityGroups"]] == group
    assert network["AssignPublicIp"] == "DISABLED"
    assert len(synthesized.of_type("AWS::ECS::Cluster")) == 1  # in the application's VPC
    # Leasehold built no VPC of its own, and its other functions stay outside the VPC.
    assert len(synthesized.of_type("AWS::EC2::VPC")) == 1
    others = [r["Properties"] for r in synthesized.of_type("AWS::Lambda::Function").values()
              if str(r["Properties"].get("Handler", "")).startswith("leasehold.")
              and r["Properties"]["Handler"] != WORKER]
    assert len(others) == 5  # api, ticker, sweeper, trigger, relay: none in the VPC
    assert all("VpcConfig" not in props for props in others)


def test_layers_reach_the_lambda_pool_alone(synthesized: App) -> None:
    assert synthesized.worker("default")["Layers"] == [LAYER_ARN]
    with_layers = [r for r in synthesized.of_type("AWS::Lambda::Function").values()
                   if "Layers" in r["Properties"]]
    assert len(with_layers) == 1


def test_the_tables_are_under_the_stacks_key_and_every_reader_may_use_it(
        synthesized: App) -> None:
    key = synthesized.logical_id(synthesized.jobs.queues.key)
    tables = {r["Properties"]["TableName"]: r["Properties"]["SSESpecification"]
              for r in synthesized.of_type("AWS::DynamoDB::Table").values()
              if r["Properties"].get("TableName", "").startswith("greeter-")}
    assert len(tables) == 5
    for sse in tables.values():
        assert sse == {"KMSMasterKeyId": {"Fn::GetAtt": [key, "Arn"]}, "SSEEnabled": True,
                       "SSEType": "KMS"}
    # Every Leasehold function's role, the ECS task role and the relay (which reads the
    # stream only) may decrypt with it.
    for props in [r["Properties"] for r in synthesized.of_type("AWS::Lambda::Function")
                  .values() if str(r["Properties"].get("Handler", "")).startswith("leasehold.")]:
        statements = synthesized.statements(_role_of(props))
        assert any("kms:Decrypt" in _actions(s) and f"${{{key}.Arn}}" in _resources(s)
                   for s in statements), props["Handler"]


def test_the_applications_role_may_call_the_api_and_write_exactly_what_enqueue_item_builds(
        synthesized: App) -> None:
    backend = [k for k in synthesized.of_type("AWS::IAM::Role") if k.startswith("Backend")]
    statements = synthesized.statements(backend[0])
    api = synthesized.logical_id(synthesized.jobs.api.rest_api)
    assert (["execute-api:Invoke"], [
        f"{ARN}:execute-api:${{AWS::Region}}:${{AWS::AccountId}}:${{{api}}}/v1/*/*"]) in [
        (_actions(s), _resources(s)) for s in statements]
    tables = {role: f"${{{synthesized.logical_id(table)}.Arn}}"
              for role, table in synthesized.jobs.tables.by_role.items()}
    on_leasehold = sorted((_actions(s), _resources(s)) for s in statements
                          if set(_resources(s)) & set(tables.values()))
    assert on_leasehold == [(["dynamodb:PutItem"], [tables["jobs"]]),
                            (["dynamodb:UpdateItem"], [tables["tenants"]])]
    key = f"${{{synthesized.logical_id(synthesized.jobs.queues.key)}.Arn}}"
    assert [_actions(s) for s in statements if key in _resources(s)] == [
        ["kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey"]]


def test_the_applications_function_gets_the_environment_compose_reads(
        synthesized: App) -> None:
    (checkout,) = [r["Properties"] for r in synthesized.of_type("AWS::Lambda::Function")
                   .values() if r["Properties"].get("Handler") == "greeter.checkout.handler"]
    env = checkout["Environment"]["Variables"]
    # What Leasehold's own functions read, without their Powertools names and the code
    # version of the bundle they run (issue 36: it names the task code that runs jobs; the
    # application's function runs none, and its own code is not in that bundle).
    ticker = synthesized.resources[synthesized.logical_id(
        synthesized.jobs.scheduling.ticker)]["Properties"]["Environment"]["Variables"]
    assert env == {k: v for k, v in ticker.items()
                   if not k.startswith("POWERTOOLS_") and k != "LEASEHOLD_CODE_VERSION"}
    settings = Settings.from_env({k: str(_render(v)) for k, v in env.items()})
    assert (settings.jobs_table, settings.tenants_table) == ("greeter-jobs-v2", "greeter-tenants")
    assert settings.task_modules == ("greeter.tasks",)
    assert settings.pools == ("default", "batch")
    assert settings.queue_url_base == "https://sqs.${AWS::Region}.${AWS::URLSuffix}/" \
                                      "${AWS::AccountId}"


def _findings(pack: NagPack, app: cdk.App) -> list[str]:
    report = pack.validate_scope(app)
    return [f"{violation.rule_name} at {resource.construct_path}"
            for violation in report.violations for resource in violation.violating_resources]


def test_cdk_nag_and_cfn_lint_stay_clean(synthesized: App) -> None:
    assert _findings(AwsSolutionsChecks(), synthesized.app) == []
    assert _findings(ServerlessChecks(), synthesized.app) == []
    matches = lint_file(synthesized.template_path, config=ManualArgs(
        regions=["us-east-1", "eu-west-1"], ignore_checks=CFN_LINT_IGNORED))
    assert [str(match) for match in matches] == []


@pytest.mark.parametrize(("pool", "message"), [
    (PoolConfig(name="p", environment={"LEASEHOLD_TASKS": "x"}),
     "environment variable 'LEASEHOLD_TASKS' is a name Leasehold or AWS sets"),
    (PoolConfig(name="p", environment={"AWS_REGION": "x"}), "'AWS_REGION' is a name"),
    (PoolConfig(name="p", environment={"POWERTOOLS_SERVICE_NAME": "x"}), "is a name"),
    (PoolConfig(name="p", environment={"1X": "x"}), "is not an environment variable name"),
    (PoolConfig(name="p", environment={"K": "v"}, secrets={"K": "s"}),
     "'K' is both a plain environment variable and a secret"),
    (PoolConfig(name="p", secrets={"K": "ssm:"}), "secret 'K': secrets: 'ssm:' names no SSM"),
    (PoolConfig(name="p", secrets={"K": "s"}, secrets_keys=["alias/x"]), "KMS key ARNs"),
    (PoolConfig(name="p", kind="ecs", layers=[object()]),  # type: ignore[list-item]
     "layers are for Lambda pools"),
    (PoolConfig(name="p", subnets=object()),  # type: ignore[arg-type]
     "pool 'p': subnets and security_groups need a vpc"),
])
def test_a_pool_setting_it_cannot_have_is_refused_by_name(pool: PoolConfig,
                                                          message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LeaseholdConfig(pools=(pool,)).validate()


def test_an_unknown_table_encryption_is_refused() -> None:
    with pytest.raises(ValueError, match="tableEncryption must be 'aws-owned' or "
                                         "'customer-managed', not 'kms'"):
        LeaseholdConfig(table_encryption="kms").validate()  # type: ignore[arg-type]
