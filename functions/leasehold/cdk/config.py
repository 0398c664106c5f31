"""What one deployment of Leasehold looks like: pools, shards, retention, alarms.

Read from CDK context (``cdk.json`` or ``cdk deploy -c key=value``) into frozen values, so that
constructs take plain typed props and tests can build any shape without a context file.
The physical names come from :class:`leasehold.settings.Settings`, the same type the functions
read from their environment, so the stack and the runtime agree on every name.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from leasehold.api.principals import parse_mapping
from leasehold.aws.definitions import TABLES
from leasehold.cdk.control import check_control_regions
from leasehold.cdk.environment import check_network
from leasehold.cdk.pool_config import PoolConfig
from leasehold.core.retention import DEFAULT_RETENTION_DAYS, MAX_RETENTION_DAYS
from leasehold.settings import (
    DEFAULT_MAX_BACKLOG,
    DEFAULT_TENANT_BURST,
    DEFAULT_TENANT_MAX_LIVE,
    DEFAULT_TENANT_RATE,
    PUBLISH_CHOICES,
    Settings,
)
from leasehold.targets.config import TargetConfig
from leasehold.targets.credentials import check_policy_room

if TYPE_CHECKING:
    from aws_cdk import aws_ec2 as ec2

#: ``pip``: the real bundle (a local pip install for Python 3.12 on arm64, no Docker).
#: ``source``: the bundle without its pip-installed dependencies; only for tests, where the
#: code is never run but synth must be fast and offline. Never deploy a ``source`` build.
BundlingMode = Literal["pip", "source"]
#: ``aws-owned``: DynamoDB's default encryption (no key to manage, no KMS requests).
#: ``customer-managed``: every table under the stack's KMS key, the one the queues use.
TableEncryption = Literal["aws-owned", "customer-managed"]
#: The API Gateway flavour in front of the API function (see ``LeaseholdConfig.api``).
ApiKind = Literal["rest", "http"]

#: Lambda allows 4 KB of environment per function and the settings take under 2 KB
#: (tests/infra/test_real_aws.py), so the tenant mapping may take this much as JSON. More
#: principals than that fit (about 25 to 40) call for an authorizer that returns the tenant.
TENANT_MAP_LIMIT = 2048


@dataclass(frozen=True, kw_only=True)
class LeaseholdConfig:
    """Everything one Leasehold deployment is built from (explicit construct arguments win)."""

    #: Prefix of every physical name; ``leasehold`` matches the CLI's default settings.
    prefix: str = "leasehold"
    pools: tuple[PoolConfig, ...] = (PoolConfig(name="default"),)
    shards: int = 8
    lease_seconds: float = 60.0
    #: The modules whose ``@task`` functions the deployment runs (``myapp.tasks``).
    task_modules: tuple[str, ...] = ()
    #: The application's package folders or ``.py`` modules, copied into the bundle under
    #: their own names; a relative path is relative to the working directory.
    code: tuple[str, ...] = ()
    #: A pip requirements file of the tasks' own dependencies, installed beside Leasehold's.
    requirements: str | None = None
    #: Task names the application submits: synth fails unless the task modules register
    #: each of them.
    required_tasks: tuple[str, ...] = ()
    log_retention_days: int = 30
    #: Days a finished job or workflow is kept before DynamoDB's TTL deletes it (0: forever;
    #: a job may ask for its own). 30 by default: see leasehold.core.retention for why.
    retention_days: int = DEFAULT_RETENTION_DAYS
    #: Job queues; ``None``: the retention of :mod:`leasehold.aws.definitions` (7 days).
    #: Their DLQs always keep 14 days, the SQS maximum.
    queue_retention_days: int | None = None
    alarm_email: str | None = None
    #: Tables survive ``cdk destroy`` and cannot be deleted by accident unless this is off.
    retain_data: bool = True
    cognito_user_pool_arn: str | None = None
    throttle_rate: float = 100.0
    throttle_burst: int = 200
    #: An AWS WAF web ACL (AWS managed common rules + per-IP rate limit) in front of the API.
    #: REST only: WAF cannot be associated with an HTTP API.
    waf: bool = True
    #: ``rest`` (API Gateway REST, $3.50 per million requests: WAF, request validation) or
    #: ``http`` (HTTP API, $1.00 per million: no WAF, the function validates every body);
    #: same routes, same function, same IAM or Cognito auth. README, "REST or HTTP API".
    api: ApiKind = "rest"
    bundling: BundlingMode = "pip"
    api_timeout_seconds: int = 29
    api_memory_mb: int = 512
    #: Days the event bus archive keeps user events (the ones triggers consume), so they can be
    #: replayed after a trigger outage; 0 keeps no archive.
    event_archive_days: int = 30
    #: Which job state changes are published to the bus (``-c events=all``; ``publish`` is
    #: its old name): ``terminal`` (the default, $1.00 per million jobs: EventBridge bills
    #: $1.00 per million events), ``all`` (about $3.00: queued, running, outcome) or ``off``
    #: (no PutEvents, $0). See :data:`leasehold.settings.PUBLISH_CHOICES` for why terminal.
    events: str = "terminal"
    #: The operator's tenant mapping, principal ARN (or ``ACCOUNT:KIND/NAME``) -> tenant
    #: (``-c tenants='{...}'`` or cdk.json). Unmapped principals are their own tenant; see
    #: leasehold.api.principals and README, "Calling the API".
    tenants: Mapping[str, str] = field(default_factory=dict)
    #: Jobs with no code (README, "Jobs with no code"; ``leasehold.targets.config``): hosts
    #: or networks HTTP targets may reach beyond public addresses, per-host limits
    #: (``{"api.partner.example": {"concurrency": 4, "rate_per_second": 10}}``), the secrets
    #: a ``secret_header`` may name, each bound to the origins it may be sent to
    #: (``{"partner-api-key": {"secret": "secretsmanager:<ARN>", "origins":
    #: ["https://api.partner.example"], "tenants": ["acme"]}}``; ``"ssm:<parameter name>"``
    #: for a parameter; ``tenants`` optional), the AWS actions AWS targets may call
    #: (``[{"action": "sns:Publish", "resources": ["arn:..."]}]``: the targets role is
    #: granted exactly these, ``leasehold.cdk.targets``), the URLs ``auth.sigv4`` may sign
    #: (``[{"url_prefix": "https://<api>.execute-api.<region>.amazonaws.com/prod/",
    #: "service": "execute-api"}]``), and the headers never shown (None: Authorization,
    #: Cookie, X-Api-Key).
    http_allow: tuple[str, ...] = ()
    http_hosts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    http_secrets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    aws_targets: tuple[Mapping[str, Any], ...] = ()
    http_sigv4: tuple[Mapping[str, Any], ...] = ()
    redact_headers: tuple[str, ...] | None = None
    #: The pool jobs with no code run on (``-c targetsPool=...``): a Lambda or ECS pool,
    #: never an external one (its remote workers would be handed ``leasehold.http``). None:
    #: the first pool that is not external. A deployment with targets settings and no such
    #: pool is refused at synth.
    targets_pool: str | None = None

    #: The network of the worker pools (Lambda functions and Fargate services; the API,
    #: ticker, sweeper, triggers and relay stay outside: they call only AWS APIs). A pool
    #: may name its own (PoolConfig.vpc). ``None``: Lambda workers outside any VPC, and
    #: Fargate workers in a VPC of the stack's own (public subnets, no NAT).
    vpc: ec2.IVpc | None = None
    #: Which subnets of ``vpc`` (CDK's default: the private ones).
    subnets: ec2.SubnetSelection | None = None
    #: The workers' security groups (default: one new group per pool, outbound only).
    security_groups: Sequence[ec2.ISecurityGroup] | None = None
    #: ``-c tableEncryption=customer-managed``: the tables under the stack's KMS key.
    table_encryption: TableEncryption = "aws-owned"
    #: ``xray`` (Lambda's active tracing, as before), ``otel`` (plus the ADOT layer, which
    #: exports Leasehold's job spans) or ``off``; what each costs: leasehold.cdk.tracing.
    tracing: str = "xray"
    #: Every tenant's admission limits (``-c tenantRate=5 -c tenantMaxLive=100``): the
    #: submissions per second it earns and may make at once, its live jobs (0: no cap) and
    #: the pool backlog past which every submission gets 503. Settings of every function
    #: alike, so the API's admission and a worker's ``ctx.spawn`` apply the same cap; a
    #: tenant's plan (a row of the tenants table, ``leasehold.tenancy.plans``) overrides
    #: its rate, burst and cap.
    tenant_rate: float = DEFAULT_TENANT_RATE
    tenant_burst: float = DEFAULT_TENANT_BURST
    tenant_max_live: int = DEFAULT_TENANT_MAX_LIVE
    max_backlog: int = DEFAULT_MAX_BACKLOG
    #: Cells with a home Region (docs/regions.md): this stack's Region as a cell
    #: (``-c cellRegion=us-east-1``; None: one Region, no control table), and the control
    #: table's Regions: three, or two and ``control_witness`` (``-c controlRegions=...``),
    #: in one Region set. The stack of the first creates the MRSC global table.
    cell_region: str | None = None
    control_regions: tuple[str, ...] = ()
    control_witness: str | None = None
    #: The Regions this cell's jobs table is replicated to (an MREC global table's replicas,
    #: which ``leasehold regions failover --take-over`` reads; ``-c jobsReplicaRegions=...``):
    #: each gets a replication-lag alarm, at ``replication_lag_alarm_seconds``.
    jobs_replica_regions: tuple[str, ...] = ()
    replication_lag_alarm_seconds: int = 60

    def targets(self) -> dict[str, Any]:
        """``Settings.targets`` as deployed (only what is set)."""
        out: dict[str, Any] = {
            "http_allow": list(self.http_allow), "http_hosts": dict(self.http_hosts),
            "http_secrets": dict(self.http_secrets),
            "aws_targets": [dict(entry) for entry in self.aws_targets],
            "http_sigv4": [dict(entry) for entry in self.http_sigv4]}
        if self.redact_headers is not None:
            out["redact_headers"] = list(self.redact_headers)
        return {name: value for name, value in out.items() if value or name == "redact_headers"}

    def validate(self) -> None:
        if self.cell_region:
            check_control_regions(self.control_regions, self.control_witness)
        if self.jobs_replica_regions and (not self.cell_region or self.cell_region in
                                          self.jobs_replica_regions):
            raise ValueError("jobsReplicaRegions are other Regions than a cell's own "
                             "(cellRegion), where its jobs table's replicas are")
        if self.table_encryption not in ("aws-owned", "customer-managed"):
            raise ValueError("tableEncryption must be 'aws-owned' or 'customer-managed', "
                             f"not {self.table_encryption!r}")
        check_network("the deployment", self.vpc, self.subnets, self.security_groups)
        names = [pool.name for pool in self.pools]
        if len(set(names)) != len(names):
            raise ValueError(f"pool names must be unique: {names}")
        for pool in self.pools:
            pool.validate()
            check_network(f"pool {pool.name!r}", pool.vpc or self.vpc, pool.subnets,
                          pool.security_groups)
        if self.api not in ("rest", "http"):
            raise ValueError(f"api must be 'rest' or 'http', not {self.api!r}")
        if self.bundling not in ("pip", "source"):
            raise ValueError("bundling must be 'pip' or 'source'")
        if self.queue_retention_days is not None and not 1 <= self.queue_retention_days <= 13:
            # 14 days is the SQS maximum, and the DLQs keep 14: a DLQ must keep messages
            # longer than its source, since a moved message keeps its original enqueue time.
            raise ValueError("queueRetentionDays must be 1..13 (the DLQs keep 14, the SQS "
                             "maximum, and must keep messages longer than their sources)")
        if self.events not in PUBLISH_CHOICES:
            raise ValueError(f"events must be one of {', '.join(PUBLISH_CHOICES)}, "
                             f"not {self.events!r}")
        if not 0 <= self.retention_days <= MAX_RETENTION_DAYS:
            raise ValueError(f"retentionDays must be 0 (keep finished jobs forever) to "
                             f"{MAX_RETENTION_DAYS}")
        if self.tracing not in ("otel", "xray", "off"):
            raise ValueError(f"tracing must be otel, xray or off, not {self.tracing!r}")
        if self.event_archive_days < 0:
            raise ValueError("eventArchiveDays must be 0 (no archive) or more")
        if len(self.tenant_map_json()) > TENANT_MAP_LIMIT:
            raise ValueError(f"tenants: the mapping takes more than {TENANT_MAP_LIMIT} "
                             "characters of the API function's 4 KB environment; map fewer "
                             "principals (one role for many callers) or use an authorizer "
                             "that returns the tenant")
        TargetConfig.parse(self.targets())  # a bad entry fails the synth, not a job
        # Each target session denies Leasehold's own resources in a policy STS limits in size.
        check_policy_room(TargetConfig.from_settings(self.settings()).own.patterns)
        self._check_targets_pool()
        self.settings().validate()

    def targets_runner(self) -> PoolConfig | None:
        """The pool jobs with no code run on (None: no Python pool, targets are off)."""
        if self.targets_pool is not None:
            return self.pool(self.targets_pool)
        return next((pool for pool in self.pools if pool.kind != "external"), None)

    def _check_targets_pool(self) -> None:
        if self.targets_pool is not None:
            if self.pool(self.targets_pool).kind == "external":
                raise ValueError(f"targets_pool {self.targets_pool!r} is an external pool: jobs "
                                 "with no code run on a Python worker (a Lambda or ECS pool)")
        elif self.targets() and self.targets_runner() is None:
            raise ValueError("jobs with no code (http_allow, http_hosts, http_secrets, "
                             "aws_targets) run on a Python pool, and every pool is external: "
                             "add a Lambda or ECS pool (and name it in targets_pool), or "
                             "remove the targets settings")

    def tenant_map_json(self) -> str:
        """``LEASEHOLD_TENANT_MAP`` for the API function (checked: raises on a bad entry)."""
        mapping = parse_mapping(dict(self.tenants))
        return json.dumps(mapping, separators=(",", ":"), sort_keys=True) if mapping else ""

    def settings(self) -> Settings:
        """The runtime settings this stack deploys; the functions read them from env."""
        # Every table the core defines gets ``<prefix>-<role>`` (``-v<n>`` from its second
        # version of the key schema on): a table added to the
        # definitions is deployed and named without a change here.
        names: dict[str, Any] = {
            f"{table.role}_table": table.default_name(self.prefix) for table in TABLES}
        if self.cell_region:
            names.update(
                cell_region=self.cell_region, control_table=f"{self.prefix}-control",
                control_region=self.cell_region if self.cell_region in self.control_regions
                else self.control_regions[0])
        return Settings(
            **names,
            queue_prefix=self.prefix,
            pools=tuple(pool.name for pool in self.pools),
            shards=self.shards,
            lease_seconds=self.lease_seconds,
            task_modules=self.task_modules,
            # The functions publish job state events to the stack's bus by this name.
            event_bus=f"{self.prefix}-events",
            publish=self.events,
            # The stack deploys the change-stream relay (leasehold.cdk.relay), which publishes
            # every event from the committed rows; nothing publishes inline.
            events_from="stream",
            retention_days=self.retention_days,
            targets=self.targets(),
            targets_pool=self.targets_pool or "",
            # A job of a Lambda pool must finish within its function's timeout: the API
            # refuses a longer timeout_seconds at submission.
            pool_timeouts={pool.name: float(pool.timeout_seconds)
                           for pool in self.pools if pool.kind == "lambda"},
            external_tasks={pool.name: tuple(pool.tasks)
                            for pool in self.pools if pool.kind == "external"},
            tenant_rate=self.tenant_rate, tenant_burst=self.tenant_burst,
            tenant_max_live=self.tenant_max_live, max_backlog=self.max_backlog,
            external_policies={name: dict(policy) for pool in self.pools
                               if pool.kind == "external" and isinstance(pool.tasks, Mapping)
                               for name, policy in pool.tasks.items() if policy},
        )

    def pool(self, name: str) -> PoolConfig:
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise ValueError(f"no pool {name!r} in this deployment (pools: "
                       f"{', '.join(pool.name for pool in self.pools)})")

    @classmethod
    def from_context(cls, get: Callable[[str], Any]) -> LeaseholdConfig:
        """Build from CDK context values (``node.try_get_context``); unset keys keep defaults.

        Values given on the command line (``-c shards=16``) arrive as strings, so each one is
        parsed; lists and pools may be JSON.
        """
        values: dict[str, Any] = {}
        text = {"prefix": "prefix", "alarmEmail": "alarm_email", "publish": "events",
                "events": "events", "tableEncryption": "table_encryption",
                "tracing": "tracing",
                "cognitoUserPoolArn": "cognito_user_pool_arn", "requirements": "requirements",
                "api": "api", "targetsPool": "targets_pool", "cellRegion": "cell_region",
                "controlWitness": "control_witness"}
        for key, name in text.items():
            if (value := get(key)) not in (None, ""):
                values[name] = str(value)
        numbers: dict[str, tuple[str, Callable[[Any], Any]]] = {
            "shards": ("shards", int), "leaseSeconds": ("lease_seconds", float),
            "logRetentionDays": ("log_retention_days", int),
            "queueRetentionDays": ("queue_retention_days", int),
            "throttleRate": ("throttle_rate", float), "throttleBurst": ("throttle_burst", int),
            "eventArchiveDays": ("event_archive_days", int),
            "retentionDays": ("retention_days", int),
            "tenantRate": ("tenant_rate", float), "tenantBurst": ("tenant_burst", float),
            "tenantMaxLive": ("tenant_max_live", int), "maxBacklog": ("max_backlog", int),
        }
        for key, (name, kind) in numbers.items():
            if (value := get(key)) not in (None, ""):
                values[name] = kind(value)
        for key, name in {"retainData": "retain_data", "waf": "waf"}.items():
            if (value := get(key)) is not None:
                values[name] = _flag(value)
        lists = {"tasks": "task_modules", "taskPackages": "code", "requiredTasks": "required_tasks",
                 "controlRegions": "control_regions",
                 "jobsReplicaRegions": "jobs_replica_regions"}
        for key, name in lists.items():
            if (value := get(key)) is not None:
                values[name] = _names(value)
        if (pools := get("pools")) is not None:
            if isinstance(pools, str):
                pools = json.loads(pools)
            values["pools"] = tuple(PoolConfig.from_json(pool) for pool in pools)
        if (tenants := get("tenants")) is not None:
            values["tenants"] = parse_mapping(tenants)
        if (mode := get("leasehold:bundling")) is not None:
            values["bundling"] = str(mode)
        config = cls(**values)
        config.validate()
        return config


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def _names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = json.loads(value) if value.startswith("[") else value.split(",")
    return tuple(str(item).strip() for item in value if str(item).strip())
