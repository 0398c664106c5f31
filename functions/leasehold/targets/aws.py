"""An AWS target: one action of one service, called with boto3 from the worker.

Only the actions the deployment lists (``aws_targets``) are accepted, checked at submit
with the parameters against botocore's own model of the operation, so a misspelt action or
parameter is a 422 before anything runs. On AWS, the construct grants exactly those actions
on exactly their resources (IAM enforces the resources); locally, the embedded emulator
serves them.
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

from leasehold.aws.clients import Clients
from leasehold.errors import ValidationError
from leasehold.targets.config import TargetConfig
from leasehold.targets.failures import AwsCallError, aws_error

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
    return {"service": service, "action": action, "parameters": dict(parameters)}, {}


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


def call(clients: Clients, payload: Mapping[str, Any]) -> Any:
    """Call the action; its response (without ``ResponseMetadata``), or the failure."""
    service, action = str(payload["service"]), str(payload["action"])
    client = clients.client(service)
    method = getattr(client, botocore.xform_name(action))
    try:
        return _plain(method(**payload["parameters"]))
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code", "AwsError"))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        raise aws_error(code, code in RETRIED_CODES or status >= 500)(
            f"{service}:{action}: {code}: {error.get('Message', '')}") from exc
    except BotoCoreError as exc:
        raise AwsCallError(f"{service}:{action}: {exc}") from exc
