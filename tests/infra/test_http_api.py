"""``LeaseholdConfig(api="http")``: an HTTP API in front of the same function, same auth, with
cdk-nag's checks passing; the default stays REST."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from aws_cdk.assertions import Match, Template

from infra.app import build
from leasehold.cdk.config import LeaseholdConfig

from .conftest import CONFIG, FEATURE_FLAGS


@pytest.fixture(scope="module")
def http_template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    app = cdk.App(outdir=str(tmp_path_factory.mktemp("cdk.out")), context=FEATURE_FLAGS)
    # With cdk-nag's AwsSolutions and Serverless packs: synth fails on any unacknowledged
    # finding.
    stack = build(app, config=dataclasses.replace(CONFIG, api="http"), nag=True,
                  synthesizer=cdk.DefaultStackSynthesizer(generate_bootstrap_version_rule=False))
    # An application's own role, granted the API as with the REST API (jobs.grant_submit).
    caller = iam.Role(stack, "AppCaller", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    stack.leasehold.grant_submit(caller)
    assembly = app.synth()
    raw = json.loads((Path(assembly.directory) / stack.template_file).read_text())
    return Template.from_json(raw)


def test_the_http_api_sends_every_route_to_the_api_function_behind_iam(
        http_template: Template) -> None:
    http_template.resource_count_is("AWS::ApiGateway::RestApi", 0)
    http_template.resource_count_is("AWS::WAFv2::WebACLAssociation", 0)
    http_template.has_resource_properties("AWS::ApiGatewayV2::Api", {"ProtocolType": "HTTP"})
    routes = http_template.find_resources("AWS::ApiGatewayV2::Route")
    assert sorted(r["Properties"]["RouteKey"] for r in routes.values()) == [
        "ANY /", "ANY /{proxy+}"]
    assert {r["Properties"]["AuthorizationType"] for r in routes.values()} == {"AWS_IAM"}
    # The REST proxy event (format 1.0): one resolver serves both APIs.
    http_template.has_resource_properties("AWS::ApiGatewayV2::Integration", {
        "IntegrationType": "AWS_PROXY", "PayloadFormatVersion": "1.0",
        "IntegrationUri": {"Fn::GetAtt": [Match.string_like_regexp("ApiFunction"), "Arn"]}})
    http_template.has_resource_properties("AWS::ApiGatewayV2::Stage", {
        "StageName": "$default", "AutoDeploy": True,
        "DefaultRouteSettings": {"ThrottlingRateLimit": CONFIG.throttle_rate,
                                 "ThrottlingBurstLimit": CONFIG.throttle_burst},
        "AccessLogSettings": {"DestinationArn": Match.any_value(),
                              "Format": Match.any_value()}})


def test_the_api_is_rest_unless_asked(http_template: Template) -> None:
    assert LeaseholdConfig().api == "rest"
    assert LeaseholdConfig.from_context({"api": "http"}.get).api == "http"
    with pytest.raises(ValueError, match="api must be 'rest' or 'http'"):
        LeaseholdConfig(api="graphql").validate()  # type: ignore[arg-type]


def test_grant_submit_grants_the_http_apis_default_stage(http_template: Template) -> None:
    policies = http_template.find_resources("AWS::IAM::Policy", {"Properties": {
        "Roles": [{"Ref": Match.string_like_regexp("AppCaller")}]}})
    [policy] = policies.values()
    [statement] = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "execute-api:Invoke"
    joined = json.dumps(statement["Resource"])
    assert "/$default/*/*" in joined and "HttpApi" in joined
