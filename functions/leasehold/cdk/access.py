"""The application's side of the construct: grants to its pools, and grants from it.

* :class:`WorkerPool`: a pool as an ``iam.IGrantable`` (the Lambda worker's role, or the ECS
  task role), so the application grants its tasks what they use the CDK way:
  ``table.grant_read_write_data(jobs.pool("default"))``.
* :func:`grant_submit`: ``execute-api:Invoke`` on the API's routes, for an application's
  own function or role that calls the API (``leasehold.client.Client(aws_auth=True)``).
* :func:`grant_enqueue`: the two writes ``leasehold.enqueue_item`` builds (a conditioned
  ``Put`` of the job row, a conditioned ``Update`` of the tenant's live-job slot), on the
  jobs and tenants tables only.
"""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_iam as iam
from constructs import Construct

from leasehold.cdk.nag import acknowledge
from leasehold.cdk.tables import Tables

#: What DynamoDB needs of a caller's key permissions to write an item under a
#: customer-managed key: CDK's write grant without its wildcards.
ENQUEUE_KEY_ACTIONS = ("kms:Decrypt", "kms:DescribeKey", "kms:Encrypt", "kms:GenerateDataKey")


@jsii.implements(iam.IGrantable)
class WorkerPool:
    """One worker pool's tasks, as a grantee: what its tasks may do is what its role may."""

    def __init__(self, name: str, role: iam.IRole) -> None:
        self.name = name
        self.role = role

    @property
    def grant_principal(self) -> iam.IPrincipal:
        return self.role

    def add_to_role_policy(self, statement: iam.PolicyStatement) -> None:
        """Add ``statement`` to the pool's role (as ``lambda_.Function.add_to_role_policy``)."""
        self.role.add_to_principal_policy(statement)


class ExternalPool:
    """An external pool (``kind="external"``): no role of its own; its workers are
    principals granted to lease from it (``jobs.pool("images").grant_lease(role)``)."""

    def __init__(self, name: str, owner: Any) -> None:
        self.name = name
        self._owner = owner

    def grant_lease(self, grantee: iam.IRole) -> iam.Grant:
        grant: iam.Grant = self._owner.grant_lease(self.name, grantee)
        return grant


def grant_submit(rest_api: apigw.RestApi | apigwv2.HttpApi, stage: str,
                 grantee: iam.IGrantable) -> iam.Grant:
    """``execute-api:Invoke`` on every route of the API's stage (a REST API's ``v1``, an HTTP
    API's ``$default``), for ``grantee``."""
    arn = rest_api.arn_for_execute_api(method="*", path="/*", stage=stage)
    grant = iam.Grant.add_to_principal(grantee=grantee, actions=["execute-api:Invoke"],
                                       resource_arns=[arn])
    # The finding is acknowledged where the statement lands: on the grantee (a function, a
    # role) or, for a pool, on its role.
    target = grantee if isinstance(grantee, Construct) else grantee.grant_principal
    if isinstance(target, Construct):
        stack = cdk.Stack.of(rest_api)
        api_id = stack.resolve(stack.get_logical_id(
            rest_api.node.default_child))  # type: ignore[arg-type]
        acknowledge(target, "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:"
                    f"<AWS::Region>:<AWS::AccountId>:<{api_id}>/{stage}/*/*]",
                    "Leasehold's API: every method and route of its one stage; what a "
                    "caller may see is decided by its tenant, not by the route.")
    return grant


def grant_enqueue(tables: Tables, grantee: iam.IGrantable) -> None:
    """``PutItem`` on the jobs table and ``UpdateItem`` on the tenants table (inside your
    ``TransactWriteItems``, each entry is authorized as its own action), and under a
    customer-managed key that key's use."""
    iam.Grant.add_to_principal(grantee=grantee, actions=["dynamodb:PutItem"],
                               resource_arns=[tables.by_role["jobs"].table_arn])
    iam.Grant.add_to_principal(grantee=grantee, actions=["dynamodb:UpdateItem"],
                               resource_arns=[tables.by_role["tenants"].table_arn])
    if tables.key is not None:
        tables.key.grant(grantee, *ENQUEUE_KEY_ACTIONS)
