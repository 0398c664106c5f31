"""The HTTP API (``LeaseholdConfig(api="http")``): the same routes and Lambda as the REST API
(:mod:`leasehold.cdk.api`) for $1.00 per million requests against REST's $3.50.

What it gives up, and why that is safe to choose:

* **No WAF.** AWS WAF cannot be associated with an HTTP API. The REST API's web ACL blocks
  known bad inputs (Log4j, Java deserialization) in the first 16 KB of a body and rate-limits
  each IP; with ``api="http"`` nothing does, except the stage's throttling below. Every
  route still needs SigV4 (or the Cognito authorizer): only principals of the account reach
  the function at all.
* **No request validation.** The REST API refuses a ``POST /jobs`` without a task name
  before any code runs; here the function does it (it validates every body anyway, with the
  same pydantic models), so a malformed request costs one invocation.
* **Payload format 1.0**, the REST proxy event, so one resolver serves both: the verified
  principal arrives in ``requestContext.identity.userArn`` (and, as in format 2.0, in
  ``requestContext.authorizer.iam``), and :func:`leasehold.api.context.tenant_of` reads
  either.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from leasehold.cdk.nag import acknowledge

#: The access log's fields (the REST API's standard fields, as HTTP API names them).
ACCESS_LOG_FORMAT = {
    "requestId": "$context.requestId", "ip": "$context.identity.sourceIp",
    "caller": "$context.identity.caller", "user": "$context.identity.user",
    "userArn": "$context.identity.userArn", "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod", "routeKey": "$context.routeKey",
    "path": "$context.path", "status": "$context.status", "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
    "integrationError": "$context.integrationErrorMessage",
}


class HttpApiFront(Construct):
    """Every path and method to the one API function, behind IAM (SigV4) or a Cognito user
    pool, with the stage's throttling and access logs."""

    def __init__(self, scope: Construct, construct_id: str, *, handler: lambda_.IFunction,
                 log_retention: logs.RetentionDays, throttle_rate: float, throttle_burst: int,
                 cognito_user_pool_arn: str | None) -> None:
        super().__init__(scope, construct_id)
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=log_retention,
            removal_policy=cdk.RemovalPolicy.DESTROY)
        authorizer: apigwv2.IHttpRouteAuthorizer = authorizers.HttpIamAuthorizer()
        if cognito_user_pool_arn:
            pool = cognito.UserPool.from_user_pool_arn(self, "UserPool", cognito_user_pool_arn)
            authorizer = authorizers.HttpUserPoolAuthorizer("Authorizer", pool)
        integration = integrations.HttpLambdaIntegration(
            "Function", handler, payload_format_version=apigwv2.PayloadFormatVersion.VERSION_1_0)
        self.http_api = apigwv2.HttpApi(
            self, "HttpApi", description="Leasehold: submit, inspect, cancel and retry jobs",
            create_default_stage=False)
        # Explicit routes, each behind the authorizer: "/" and every path below it.
        for path in ("/", "/{proxy+}"):
            self.http_api.add_routes(path=path, methods=[apigwv2.HttpMethod.ANY],
                                     integration=integration, authorizer=authorizer)
        self.stage = self.http_api.add_stage(
            "Stage", stage_name="$default", auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=throttle_rate,
                                              burst_limit=throttle_burst))
        stage = self.stage.node.default_child
        assert isinstance(stage, apigwv2.CfnStage)
        stage.access_log_settings = apigwv2.CfnStage.AccessLogSettingsProperty(
            destination_arn=self.access_logs.log_group_arn,
            format=cdk.Stack.of(self).to_json_string(ACCESS_LOG_FORMAT))
        acknowledge(self.http_api, "AwsSolutions-APIG1",
                    "Access logging is configured on the $default stage (access_log_settings).")

    @property
    def url(self) -> str:
        return self.http_api.api_endpoint + "/"

    def execute_api_arn(self, method: str = "*", path: str = "/*") -> str:
        """``execute-api:Invoke``'s resource for ``method`` on ``path`` (``/jobs``) of the
        ``$default`` stage: what a caller's IAM policy grants (``jobs.grant_submit``)."""
        return self.http_api.arn_for_execute_api(method, path, "$default")
