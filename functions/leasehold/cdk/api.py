"""The REST API: SigV4 (IAM) auth by default or a Cognito authorizer, validation, logs, limits.

Every route goes to one ``api`` Lambda (the REST proxy integration); the gateway adds what a
function cannot do cheaply: authentication before any code runs, rejecting malformed
submissions, per-stage throttling, access logs, and an optional WAF web ACL.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from leasehold.api.models import SubmitJob
from leasehold.cdk.nag import acknowledge
from leasehold.cdk.request_models import gateway_schema

STAGE = "v1"
#: The gateway checks only the shape the domain cannot do without: a task name or a target,
#: never both (and a known priority, or none). The schema is generated from the API's own
#: model, so the two agree.
SUBMIT_SCHEMA = gateway_schema(SubmitJob, ("task", "priority"), one_of={
    "task": apigw.JsonSchemaType.STRING, "target": apigw.JsonSchemaType.OBJECT})
#: The AWS common rule set's rules that inspect the request body. Job payloads are arbitrary
#: JSON that the API only stores and hands to tasks: URLs, file paths and markup in them are
#: ordinary data (a crawler's URL list, an export path, an HTML e-mail body), which these
#: rules block as RFI, LFI, SSRF and XSS. Every route with a body carries such payloads
#: (jobs, schedules' and triggers' job templates, workflow steps), so these rules only count,
#: on every route: their matches still show in WAF's metrics and sampled requests. The API is
#: SigV4-authenticated, so only principals of the account can send a body at all.
#: ``SizeRestrictions_BODY`` blocks bodies over 8 KiB, below the 256 KiB payload limit the
#: API enforces itself.
COUNTED_BODY_RULES = ("SizeRestrictions_BODY", "CrossSiteScripting_BODY", "GenericRFI_BODY",
                      "GenericLFI_BODY", "EC2MetaDataSSRF_BODY")
#: Requests per five minutes from one IP before WAF blocks it (stage throttling is global).
WAF_RATE_LIMIT = 3000


class Api(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, handler: lambda_.IFunction,
                 log_retention: logs.RetentionDays, throttle_rate: float, throttle_burst: int,
                 cognito_user_pool_arn: str | None, waf: bool) -> None:
        super().__init__(scope, construct_id)
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=log_retention,
            removal_policy=cdk.RemovalPolicy.DESTROY)
        authorizer: apigw.IAuthorizer | None = None
        auth_type = apigw.AuthorizationType.IAM
        if cognito_user_pool_arn:
            pool = cognito.UserPool.from_user_pool_arn(self, "UserPool", cognito_user_pool_arn)
            authorizer = apigw.CognitoUserPoolsAuthorizer(
                self, "Authorizer", cognito_user_pools=[pool])
            auth_type = apigw.AuthorizationType.COGNITO
        self.rest_api = apigw.RestApi(
            self, "RestApi",
            description="Leasehold: submit, inspect, cancel and retry jobs",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # Creates the account-level role API Gateway needs to write execution logs.
            cloud_watch_role=True,
            # The role and AWS::ApiGateway::Account are account-wide (one per region):
            # deleting them with this stack would break execution logging for every other
            # API in the region, so they outlive it (CDK's own default).
            cloud_watch_role_removal_policy=cdk.RemovalPolicy.RETAIN,
            deploy_options=apigw.StageOptions(
                stage_name=STAGE,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True, http_method=True, ip=True, protocol=True, request_time=True,
                    resource_path=True, response_length=True, status=True, user=True),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                # Request bodies are job payloads: never copy them into logs.
                data_trace_enabled=False,
                metrics_enabled=True,
                tracing_enabled=True,
                throttling_rate_limit=throttle_rate,
                throttling_burst_limit=throttle_burst,
            ),
            default_integration=apigw.LambdaIntegration(handler),
            default_method_options=apigw.MethodOptions(
                authorization_type=auth_type, authorizer=authorizer),
        )
        validator = self.rest_api.add_request_validator(
            "Validator", validate_request_body=True, validate_request_parameters=True)
        submit_model = self.rest_api.add_model(
            "SubmitJob", content_type="application/json", schema=SUBMIT_SCHEMA,
            description="POST /jobs: an object with a task name")
        # Explicit resources rather than add_proxy(), whose ANY method skips the validator.
        root = self.rest_api.root
        jobs = root.add_resource("jobs")
        jobs.add_method("POST", request_validator=validator,
                        request_models={"application/json": submit_model})
        for resource in (root, root.add_resource("{proxy+}"), jobs, jobs.add_resource("{proxy+}")):
            resource.add_method("ANY", request_validator=validator)
        if auth_type is apigw.AuthorizationType.IAM:
            acknowledge(self.rest_api, "AwsSolutions-COG4",
                        "Authorization is IAM (SigV4) by default; set cognitoUserPoolArn to use "
                        "a Cognito authorizer instead.")
        role = self.rest_api.node.find_child("CloudWatchRole")
        acknowledge(role, "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
                    "service-role/AmazonAPIGatewayPushToCloudWatchLogs]",
                    "The account-level role API Gateway uses for execution logs; AWS maintains "
                    "this policy for exactly that purpose.")
        self.web_acl: wafv2.CfnWebACL | None = None
        if waf:
            self.web_acl = self._web_acl()
            wafv2.CfnWebACLAssociation(
                self, "WebAclAssociation",
                resource_arn=self.rest_api.deployment_stage.stage_arn,
                web_acl_arn=self.web_acl.attr_arn)
        else:
            acknowledge(self.rest_api.deployment_stage, "AwsSolutions-APIG3",
                        "WAF turned off by configuration (waf=false).")

    @property
    def url(self) -> str:
        return self.rest_api.url

    def execute_api_arn(self, method: str = "*", path: str = "/*") -> str:
        """``execute-api:Invoke``'s resource for ``method`` on ``path`` (``/jobs``) of the
        stage: what a caller's IAM policy grants (``jobs.grant_submit``)."""
        return self.rest_api.arn_for_execute_api(method, path, STAGE)

    def _web_acl(self) -> wafv2.CfnWebACL:
        def visibility(name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
            return wafv2.CfnWebACL.VisibilityConfigProperty(
                cloud_watch_metrics_enabled=True, metric_name=name, sampled_requests_enabled=True)

        def managed(name: str, priority: int,
                    count: tuple[str, ...] = ()) -> wafv2.CfnWebACL.RuleProperty:
            return wafv2.CfnWebACL.RuleProperty(
                name=name, priority=priority, visibility_config=visibility(name),
                override_action=wafv2.CfnWebACL.OverrideActionProperty(none={}),
                statement=wafv2.CfnWebACL.StatementProperty(
                    managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                        vendor_name="AWS", name=name,
                        rule_action_overrides=[
                            wafv2.CfnWebACL.RuleActionOverrideProperty(
                                name=rule,
                                action_to_use=wafv2.CfnWebACL.RuleActionProperty(count={}))
                            for rule in count
                        ] or None)))

        return wafv2.CfnWebACL(
            self, "WebAcl", scope="REGIONAL",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            visibility_config=visibility("leasehold-api"),
            rules=[
                managed("AWSManagedRulesCommonRuleSet", 1, count=COUNTED_BODY_RULES),
                managed("AWSManagedRulesKnownBadInputsRuleSet", 2),
                wafv2.CfnWebACL.RuleProperty(
                    name="RatePerIp", priority=3, visibility_config=visibility("RatePerIp"),
                    action=wafv2.CfnWebACL.RuleActionProperty(block={}),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                            aggregate_key_type="IP", limit=WAF_RATE_LIMIT))),
            ],
        )
