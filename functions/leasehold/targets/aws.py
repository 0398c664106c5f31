"""An AWS target: one action of one service, called with boto3 under the targets role.

Only the actions the deployment lists (``aws_targets``) are accepted, checked at submit
with the parameters against botocore's own model of the operation, so a misspelt action or
parameter is a 422 before anything runs. The resources the call names (:mod:`.resources`)
must match the grant's listed ARN patterns, and may never be Leasehold's own, whatever the
grant lists: a 422 naming the parameter (``target.aws.parameters.TableName``), checked again
before the call. The call is made with the targets role's credentials
(:mod:`.credentials`), never the worker's: a session for the job, whose policy allows the
action on the resources the call names only and denies Leasehold's own. On AWS the
construct grants that role exactly the listed actions on their resources; locally, the
embedded emulator serves them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

import botocore.session
from botocore.exceptions import BotoCoreError, ClientError, ParamValidationError
from botocore.model import OperationModel
from botocore.validate import validate_parameters

from leasehold.errors import NonRetryableError, ValidationError
from leasehold.targets.config import AwsGrant, TargetConfig
from leasehold.targets.credentials import NoTargetsRole, TargetCredentials, Who, policy
from leasehold.targets.endpoints import NO_ROLE
from leasehold.targets.failures import AwsCallError, aws_error
from leasehold.targets.resources import matches, named

F = "target.aws"
#: boto3's service names whose IAM action prefix differs.
IAM_PREFIX = {"stepfunctions": "states", "elbv2": "elasticloadbalancing",
              "apigatewaymanagementapi": "execute-api"}
RESULT_BYTES = 32 * 1024
#: Error codes retried under the job's policy (besides any 5xx).
RETRIED_CODES = {"Throttling", "ThrottlingException", "ThrottledException",
                 "RequestLimitExceeded", "TooManyRequestsException",
                 "ProvisionedThroughputExceededException", "ServiceUnavailable",
                 "InternalError", "InternalFailure", "RequestTimeout"}


class AwsRefused(AwsCallError, NonRetryableError):
    """The call is not one the deployment allows (its action or resources)."""

    code = "aws_refused"


def iam_action(service: str, action: str) -> str:
    return f"{IAM_PREFIX.get(service, service)}:{action}"


@cache
def _operation(service: str, action: str) -> OperationModel | None:
    session = botocore.session.get_session()
    if service not in session.get_available_services():
        return None
    model = session.get_service_model(service)
    return model.operation_model(action) if action in model.operation_names else None


def prepare(config: TargetConfig, value: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    if not isinstance(value, Mapping):
        raise ValidationError(F, "must be an object")
    unknown = set(value) - {"service", "action", "parameters"}
    if unknown:
        raise ValidationError(F, f"unknown field(s) {sorted(unknown)}; it takes action, "
                                 "parameters, service")
    service, action = value.get("service"), value.get("action")
    if not isinstance(service, str) or not service:
        raise ValidationError(f"{F}.service", "must be a boto3 service name, as 'sns'")
    if not isinstance(action, str) or not action:
        raise ValidationError(f"{F}.action", "must be an action name, as 'Publish'")
    name = iam_action(service, action)
    if not config.allows_action(name):
        allowed = ", ".join(sorted(g.action for g in config.aws)) or "none"
        raise ValidationError(f"{F}.action", f"{name} is not allowed by this deployment "
                                             f"(aws_targets allows: {allowed})")
    operation = _operation(service, action)
    if operation is None:
        raise ValidationError(f"{F}.action", f"{service} has no action {action!r}")
    parameters = value.get("parameters", {})
    if not isinstance(parameters, Mapping):
        raise ValidationError(f"{F}.parameters", "must be an object")
    try:
        if operation.input_shape is not None:
            validate_parameters(dict(parameters), operation.input_shape)
        elif parameters:
            raise ValidationError(f"{F}.parameters", f"{action} takes no parameters")
    except ParamValidationError as exc:
        raise ValidationError(f"{F}.parameters", str(exc)) from exc
    if config.role_arn is None:
        raise ValidationError(F, NO_ROLE)
    check_resources(config, service, action, parameters)
    return {"service": service, "action": action, "parameters": dict(parameters)}, {}


def _grant(config: TargetConfig, name: str) -> AwsGrant:
    return next(grant for grant in config.aws if grant.action == name)


def check_resources(config: TargetConfig, service: str, action: str,
                    parameters: Mapping[str, Any]) -> list[str]:
    """The ARNs the call names, each listed by its grant and none Leasehold's own; else a
    ValidationError naming the parameter."""
    grant = _grant(config, iam_action(service, action))
    operation = _operation(service, action)
    found = named(service, operation.input_shape if operation else None, parameters,
                  config.place)
    for path, arn in found:
        field = f"{F}.parameters.{path}"
        if config.own.holds(arn):
            raise ValidationError(field, f"{arn} is one of Leasehold's own resources, which "
                                         "no target may reach")
        if not any(matches(pattern, arn) for pattern in grant.resources):
            raise ValidationError(field, f"{arn} is not among the resources aws_targets "
                                         f"lists for {grant.action}: "
                                         f"{', '.join(grant.resources)}")
    if not found and "*" not in grant.resources:
        raise ValidationError(f"{F}.parameters", f"names none of the resources aws_targets "
                                                 f"lists for {grant.action}")
    return [arn for _, arn in found]


def _plain(value: Any) -> Any:
    """A response as JSON: times as ISO text, streams read (up to the result's size)."""
    if hasattr(value, "read"):
        data = value.read(RESULT_BYTES)
        return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items() if k != "ResponseMetadata"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return json.loads(json.dumps(value, default=str))


def session_policy(config: TargetConfig, service: str, action: str,
                   parameters: Mapping[str, Any]) -> str:
    """The session's policy: the action on the resources the call names (or, when it names
    none the walk knows, on the grant's), and Leasehold's own resources denied. Computed
    apart from :func:`check_resources`, so a check missed still leaves IAM to refuse."""
    name = iam_action(service, action)
    operation = _operation(service, action)
    found = [arn for _, arn in named(service, operation.input_shape if operation else None,
                                     parameters, config.place)]
    grants = [grant.resources for grant in config.aws if grant.action == name]
    listed = [pattern for resources in grants for pattern in resources]
    resources = [arn for arn in found if any(matches(p, arn) for p in listed)] if found \
        else listed
    return policy([(name, sorted(set(resources)) or ["*"])] if resources else [],
                  config.own.patterns)


def call(config: TargetConfig, credentials: TargetCredentials, payload: Mapping[str, Any],
         who: Who | None = None) -> Any:
    """Call the action under the targets role; its response (without
    ``ResponseMetadata``), or the failure."""
    service, action = str(payload["service"]), str(payload["action"])
    parameters = dict(payload["parameters"])
    if credentials.role_arn is None:
        raise NoTargetsRole(NO_ROLE)
    try:  # checked again: a payload is only what was stored
        if not config.allows_action(iam_action(service, action)):
            raise ValidationError(f"{F}.action", f"{iam_action(service, action)} is not "
                                                 "allowed by this deployment")
        check_resources(config, service, action, parameters)
    except ValidationError as exc:
        raise AwsRefused(f"{exc.field}: {exc}") from None
    session = credentials.get(who, session_policy(config, service, action, parameters))
    client = credentials.client(service, session)
    method = getattr(client, botocore.xform_name(action))
    try:
        return _plain(method(**parameters))
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "AwsError"))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        raise aws_error(code, code in RETRIED_CODES or status >= 500)(
            f"{service}:{action}: {code}: {error.get('Message', '')}") from exc
    except BotoCoreError as exc:
        raise AwsCallError(f"{service}:{action}: {exc}") from exc
