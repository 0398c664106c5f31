"""One worker pool of a deployment: its queues (one per priority) and what consumes them.

Part of :mod:`leasehold.cdk.config` (which re-exports :class:`PoolConfig`), apart because a
pool's settings and checks are a concern of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from leasehold.cdk.environment import check_pool
from leasehold.settings import FUNCTION_TIMEOUT_RESERVE_SECONDS, PRIORITIES

if TYPE_CHECKING:
    from aws_cdk import aws_ec2 as ec2
    from aws_cdk import aws_lambda as lambda_

PoolKind = Literal["lambda", "ecs", "external"]

#: Lambda event source mappings accept a maximum concurrency between 2 and 1000.
MIN_MAX_CONCURRENCY = 2
#: AWS guidance for SQS-triggered Lambdas: visibility >= 6 x the function timeout, so a
#: message is not redelivered while throttled retries of the same batch are still pending.
VISIBILITY_TIMEOUT_FACTOR = 6

@dataclass(frozen=True, kw_only=True)
class PoolConfig:
    """One worker pool: its queues (one per priority) and what consumes them."""

    name: str
    kind: PoolKind = "lambda"
    memory_mb: int = 1024
    #: Lambda: the function timeout. ECS: the longest attempt a worker expects to run.
    timeout_seconds: int = 300
    #: Lambda: maximum concurrent invocations per priority queue. High gets the most so that
    #: urgent work is not starved by a backlog of low-priority jobs sharing the pool.
    concurrency: Mapping[str, int] = field(
        default_factory=lambda: {"high": 20, "normal": 10, "low": 5})
    batch_size: int = 10
    #: ECS only: a worker image of your own (it must run ``leasehold worker`` with the task
    #: modules importable). ``None``: an image built from the Lambda bundle at deploy.
    image: str | None = None
    cpu: int = 512
    min_tasks: int = 0
    max_tasks: int = 10
    #: Plain settings for the pool's task code, as environment variables. Names Leasehold
    #: sets (``LEASEHOLD_*``, Powertools') or AWS and Lambda reserve are refused. Never a
    #: secret: the template holds these values.
    environment: Mapping[str, str] = field(default_factory=dict)
    #: Environment variable -> where its value is kept: a Secrets Manager secret's name or
    #: ARN, or ``ssm:/parameter/name`` (or an SSM parameter ARN) for a SecureString. Read
    #: when the worker starts (leasehold.aws.secrets); only the reference is in the
    #: template. The pool's role may read exactly these.
    secrets: Mapping[str, str] = field(default_factory=dict)
    #: ARNs of the customer-managed KMS keys those secrets are encrypted with (none for the
    #: AWS managed ``aws/secretsmanager`` and ``aws/ssm`` keys): ``kms:Decrypt`` on them,
    #: through Secrets Manager or SSM only.
    secrets_keys: Sequence[str] = ()
    #: This pool's network, instead of the deployment's (LeaseholdConfig.vpc, ...): a
    #: pool's own ``vpc`` brings its own ``subnets`` and ``security_groups`` (or CDK's
    #: defaults: the private subnets, a new group); without one, ``subnets`` and
    #: ``security_groups`` select in the deployment's VPC.
    vpc: ec2.IVpc | None = None
    subnets: ec2.SubnetSelection | None = None
    security_groups: Sequence[ec2.ISecurityGroup] | None = None
    #: Lambda pools only: layers added to the worker function.
    layers: Sequence[lambda_.ILayerVersion] = ()
    #: ``kind="external"`` only: the tasks workers in any language lease from this pool over
    #: HTTP (``POST /workers/lease``, leasehold.remote). The pool gets its queues and DLQs,
    #: and no consumer; ``POST /jobs`` accepts these names. A mapping gives each its policy
    #: (``{"resize": {"timeout_seconds": 60, "max_attempts": 3, "retry": {...}}}``: what a
    #: Python task's decorator sets; docs/protocol.md, "Timeouts").
    tasks: Sequence[str] | Mapping[str, Mapping[str, Any]] = ()

    def validate(self) -> None:
        check_pool(self)
        if self.kind not in ("lambda", "ecs", "external"):
            raise ValueError(f"pool {self.name!r}: kind must be 'lambda', 'ecs' or 'external'")
        if (self.kind == "external") != bool(self.tasks):
            raise ValueError(f"pool {self.name!r}: an external pool names its tasks "
                             "(tasks=[...]), and only an external pool does")
        missing = set(PRIORITIES) - set(self.concurrency)
        if missing:
            raise ValueError(f"pool {self.name!r}: concurrency missing for {sorted(missing)}")
        if any(value < MIN_MAX_CONCURRENCY for value in self.concurrency.values()):
            raise ValueError(f"pool {self.name!r}: concurrency must be >= {MIN_MAX_CONCURRENCY}")
        low = int(FUNCTION_TIMEOUT_RESERVE_SECONDS) + 1
        if self.kind == "lambda" and not low <= self.timeout_seconds <= 900:
            # Up to 900 s is Lambda's limit; a worker keeps a reserve back to record outcomes.
            raise ValueError(f"pool {self.name!r}: a Lambda timeout is {low}..900 seconds")

    @property
    def visibility_timeout_seconds(self) -> int:
        return VISIBILITY_TIMEOUT_FACTOR * self.timeout_seconds

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> PoolConfig:
        names = {
            "name": "name", "kind": "kind", "memory": "memory_mb", "memoryMb": "memory_mb",
            "timeout": "timeout_seconds", "timeoutSeconds": "timeout_seconds",
            "concurrency": "concurrency", "batchSize": "batch_size", "image": "image",
            "cpu": "cpu", "minTasks": "min_tasks", "maxTasks": "max_tasks",
            "environment": "environment", "secrets": "secrets", "secretsKeys": "secrets_keys",
            "tasks": "tasks",
        }
        unknown = set(value) - set(names)
        if unknown:
            raise ValueError(f"unknown pool settings: {sorted(unknown)}")
        values = {names[key]: item for key, item in value.items()}
        if "secrets_keys" in values:
            values["secrets_keys"] = tuple(values["secrets_keys"])
        if "tasks" in values and not isinstance(values["tasks"], Mapping):
            values["tasks"] = tuple(values["tasks"])  # a mapping keeps each task's policy
        return cls(**values)
