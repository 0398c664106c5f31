"""``Leasehold``: the whole scheduler as one construct for an application's own CDK app.

    from leasehold.cdk import Leasehold, PoolConfig

    jobs = Leasehold(stack, "Jobs", code=["myapp"], tasks=["myapp.tasks"],
                     requirements="requirements.txt", pools=[PoolConfig(name="default")])

It wires the constructs of each concern together and grants each function what it uses.
The application grants its own code through it, the CDK way:

    table.grant_read_write_data(jobs.pool("default"))   # the pool's tasks use your table
    jobs.grant_submit(my_function)                       # your function calls the API
    jobs.grant_enqueue(my_function)                      # ... or enqueue_item()s
    jobs.environment_for(my_function)                    # ... with what compose() reads
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from leasehold.cdk.access import ExternalPool, WorkerPool, grant_enqueue, grant_submit
from leasehold.cdk.api import STAGE, Api
from leasehold.cdk.bus import EventBus
from leasehold.cdk.cell_alarms import CellAlarms
from leasehold.cdk.code import PACKAGE, BundleSpec, bundling
from leasehold.cdk.config import LeaseholdConfig, PoolConfig
from leasehold.cdk.control import ControlTable
from leasehold.cdk.functions import LeaseholdFunction
from leasehold.cdk.http_api import HttpApiFront
from leasehold.cdk.image import WorkerImage
from leasehold.cdk.monitoring import NAMESPACE, SERVICE, Monitoring
from leasehold.cdk.nag import acknowledge
from leasehold.cdk.queues import Queues
from leasehold.cdk.relay import Relay
from leasehold.cdk.scheduling import TickerSweeper
from leasehold.cdk.tables import Tables
from leasehold.cdk.targets import TargetsRole, needs_role
from leasehold.cdk.tracing import apply_tracing
from leasehold.cdk.triggers import Triggers
from leasehold.cdk.workers import Workers
from leasehold.targets.config import TargetConfig

API_HANDLER = "leasehold.handlers.api.handler"
#: The code version the functions and containers run (``Settings.code_version``): the
#: first hex digits of the bundle's content hash, enough to tell deploys apart.
CODE_VERSION_VARIABLE = "LEASEHOLD_CODE_VERSION"
CODE_VERSION_LENGTH = 12

_RETENTION = {
    1: logs.RetentionDays.ONE_DAY, 3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS, 7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS, 30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS, 90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS, 365: logs.RetentionDays.ONE_YEAR,
    731: logs.RetentionDays.TWO_YEARS, 1827: logs.RetentionDays.FIVE_YEARS,
    3653: logs.RetentionDays.TEN_YEARS,
}


def retention(days: int) -> logs.RetentionDays:
    """The shortest CloudWatch retention (it takes only certain values) of at least ``days``."""
    chosen = next((value for value in sorted(_RETENTION) if value >= days), max(_RETENTION))
    return _RETENTION[chosen]




class Leasehold(Construct):
    """Tables, queues, workers, ticker and sweeper, triggers, the API and its monitoring,
    running the application's tasks.

    ``tasks``: the task modules to import (``myapp.tasks``). ``code``: the package folders
    or ``.py`` modules holding them, from any path (relative: to the working directory).
    ``requirements``: a pip requirements file of their dependencies, installed for Lambda's
    arm64 Python 3.12 beside Leasehold's. ``pools``: the worker pools; an ECS pool without
    an ``image`` gets one built from the same bundle. ``required_tasks``: task names the
    application submits. ``vpc``, ``subnets`` and ``security_groups``: the worker pools'
    network (a pool may name its own). Every other setting is in ``config``; the arguments
    given here win.

    Synth imports every task module from the finished bundle and fails, naming the module,
    if one cannot be imported, if a required task is not registered or if a task runs in a
    pool this deployment does not have.
    """

    def __init__(self, scope: Construct, construct_id: str, *,
                 tasks: Sequence[str] | None = None,
                 code: Sequence[str | os.PathLike[str]] | None = None,
                 requirements: str | os.PathLike[str] | None = None,
                 pools: Sequence[PoolConfig] | None = None,
                 required_tasks: Sequence[str] | None = None,
                 config: LeaseholdConfig | None = None,
                 vpc: ec2.IVpc | None = None,
                 subnets: ec2.SubnetSelection | None = None,
                 security_groups: Sequence[ec2.ISecurityGroup] | None = None) -> None:
        super().__init__(scope, construct_id)
        overrides: dict[str, Any] = {}
        if tasks is not None:
            overrides["task_modules"] = tuple(tasks)
        if code is not None:
            overrides["code"] = tuple(os.fspath(path) for path in code)
        if requirements is not None:
            overrides["requirements"] = os.fspath(requirements)
        if pools is not None:
            overrides["pools"] = tuple(pools)
        if required_tasks is not None:
            overrides["required_tasks"] = tuple(required_tasks)
        if vpc is not None:
            overrides["vpc"] = vpc
        if subnets is not None:
            overrides["subnets"] = subnets
        if security_groups is not None:
            overrides["security_groups"] = tuple(security_groups)
        config = dataclasses.replace(config or LeaseholdConfig(), **overrides)
        config.validate()
        self.config = config
        settings = config.settings()
        log_retention = retention(config.log_retention_days)

        self.queues = Queues(self, "Queues", settings=settings, pools=config.pools,
                             retention_days=config.queue_retention_days,
                             retain_data=config.retain_data)
        # customer-managed: the tables under the queues' key (one key, one rotation).
        self.tables = Tables(self, "Tables", settings=settings, retain_data=config.retain_data,
                             key=(self.queues.key if config.table_encryption
                                  == "customer-managed" else None))
        assert settings.event_bus is not None  # LeaseholdConfig.settings names the bus
        self.bus = EventBus(self, "Events", name=settings.event_bus,
                            archive_days=config.event_archive_days)

        # The core's own serializer writes the environment, so every variable the functions
        # read is one Settings knows. AWS_REGION is set by Lambda itself (and reserved).
        # Queue URLs are derived at run time from this base, not listed: every function would
        # otherwise carry every queue's URL, and Lambda's 4 KB environment limit broke
        # deploys at about six pools.
        settings = settings.with_(queue_url_base=(
            f"https://sqs.{cdk.Aws.REGION}.{cdk.Aws.URL_SUFFIX}/{cdk.Aws.ACCOUNT_ID}"))
        # Jobs with no code call out under a role of their own, never the worker's
        # (leasehold.cdk.targets); every function knows it (a submission refuses a sigv4 or
        # AWS target without one). It trusts the runner's role, built below.
        target_config = TargetConfig.parse(config.targets())
        runs_targets = config.targets_runner()
        self.targets_role: TargetsRole | None = None
        if runs_targets is not None and needs_role(target_config):
            self.targets_role = TargetsRole(self, "Targets", config=target_config)
            settings = settings.with_(targets_role_arn=self.targets_role.role.role_arn)
        self.settings = settings
        environment = {k: v for k, v in settings.to_env().items() if k != "AWS_REGION"}
        #: What ``compose()`` reads in an application's own function (:meth:`environment_for`).
        self.environment: Mapping[str, str] = dict(environment)
        environment.update({
            "POWERTOOLS_SERVICE_NAME": SERVICE,
            "POWERTOOLS_METRICS_NAMESPACE": NAMESPACE,
        })
        # One bundle, one upload, shared by every function and every built worker image.
        # Its hash is taken from the output: any change to Leasehold, the tasks or the
        # requirements re-bundles and re-checks, and an unchanged result is not re-uploaded.
        self.bundle = s3_assets.Asset(
            self, "Code", path=str(PACKAGE), asset_hash_type=cdk.AssetHashType.OUTPUT,
            bundling=bundling(BundleSpec.resolve(
                code=config.code, requirements=config.requirements,
                task_modules=config.task_modules, required_tasks=config.required_tasks,
                pools=tuple(pool.name for pool in config.pools),
                install=config.bundling == "pip")))
        code_asset = lambda_.Code.from_bucket(self.bundle.bucket, self.bundle.s3_object_key)
        # The code version every job and attempt records (issue 36): the bundle's content
        # hash, so two deploys of the same code share it and any change to the tasks, to
        # Leasehold or to a dependency makes a new one. (An ECS pool with an image of its
        # own carries it too: that image is the operator's, built from this bundle or not.)
        environment[CODE_VERSION_VARIABLE] = self.bundle.asset_hash[:CODE_VERSION_LENGTH]
        cdk.Annotations.of(self.bundle).acknowledge_warning(
            "@aws-cdk/aws-lambda:codeFromBucketObjectVersionNotSpecified",
            "The object key is the bundle's content hash: new code is a new key, so the "
            "functions update without an object version.")
        built_image = None
        if any(pool.kind == "ecs" and not pool.image for pool in config.pools):
            built_image = WorkerImage(self, "WorkerImage", bundle=self.bundle).image

        self.workers = Workers(self, "Workers", pools=config.pools, queues=self.queues,
                               tables=self.tables, code=code_asset, environment=environment,
                               log_retention=log_retention, config=config,
                               built_image=built_image)
        # Jobs with no code run on the targets pool (a Python pool): its worker may assume the
        # targets role, and holds none of the target grants itself.
        if self.targets_role is not None and runs_targets is not None:
            self.targets_role.trust(self.workers.roles[runs_targets.name])
        self.scheduling = TickerSweeper(self, "TickerSweeper", queues=self.queues,
                                        tables=self.tables, code=code_asset,
                                        environment=environment, log_retention=log_retention)
        # Only the API names tenants, so only it carries the operator's mapping.
        tenant_map = config.tenant_map_json()
        api_environment = {**environment, **(
            {"LEASEHOLD_TENANT_MAP": tenant_map} if tenant_map else {})}
        api_fn = LeaseholdFunction(
            self, "ApiFunction", handler=API_HANDLER, code=code_asset,
            environment=api_environment,
            memory_mb=config.api_memory_mb, timeout_seconds=config.api_timeout_seconds,
            log_retention=log_retention, description="Leasehold REST API",
        ).function
        self.tables.grant_data(api_fn)
        # POST /pools/{pool}/pause disables a Lambda pool's event source mappings (and resume
        # enables them): the API names them, and may update those mappings only.
        if self.workers.mappings:
            api_fn.add_environment("LEASEHOLD_EVENT_SOURCE_MAPPINGS", ",".join(
                f"{pool}=" + ";".join(m.event_source_mapping_id for m in found)
                for pool, found in self.workers.mappings.items()))
            api_fn.add_to_role_policy(iam.PolicyStatement(
                actions=["lambda:UpdateEventSourceMapping"],
                resources=[m.event_source_mapping_arn for found in
                           self.workers.mappings.values() for m in found]))
        self.triggers = Triggers(self, "Triggers", bus=self.bus, queues=self.queues,
                                 tables=self.tables, code=code_asset, environment=environment,
                                 log_retention=log_retention)
        # Submissions hand off, redrives re-send, admission control reads queue depths,
        # and dead-letter listing reads the DLQs.
        self.queues.grant_send(api_fn)
        self.queues.grant_inspect(api_fn)
        self.queues.grant_consume(api_fn, self.queues.dead.values())
        # Remote workers lease external pools' jobs through the API (leasehold.remote): it
        # receives, keeps invisible and deletes their messages for them.
        self.queues.grant_consume(api_fn, [
            queue for (pool, _), queue in self.queues.work.items()
            if self.config.pool(pool).kind == "external"])
        self.api_function = api_fn
        #: principal ARN -> the pools it may lease from (``grant_lease``), for the API.
        self._lease_grants: dict[str, set[str]] = {}
        # GET /stats reads each queue's oldest-message age, which SQS publishes only to
        # CloudWatch. Its own policy, so that the acknowledgment below covers this alone.
        assert api_fn.role is not None  # LeaseholdFunction gives every function its role
        stats_policy = iam.Policy(
            self, "ApiQueueAgeMetrics", roles=[api_fn.role],
            statements=[iam.PolicyStatement(actions=["cloudwatch:GetMetricStatistics"],
                                            resources=["*"])])
        acknowledge(stats_policy, "AwsSolutions-IAM5[Resource::*]",
                    "cloudwatch:GetMetricStatistics supports no resource-level permissions "
                    "(the IAM service authorization reference lists no resource type); it "
                    "only reads metrics, for GET /stats' oldest_age_seconds.")
        acknowledge(api_fn, "Serverless-LambdaDLQ",
                    "Invoked synchronously by API Gateway; errors are returned to the caller.")
        functions = (*self.workers.functions.values(), *self.scheduling.functions.values(),
                     api_fn, self.triggers.function)
        for grantee in functions:
            self.tables.acknowledge_index_grants(grantee.role)  # type: ignore[arg-type]
        # Cells with a home Region: every process that leases, finishes or accepts work reads
        # and writes the control table (its Region lease, tenants' homes).
        self.control: ControlTable | None = None
        if settings.cell_region:
            self.control = ControlTable(
                self, "ControlTable", table_name=settings.control_table,
                regions=config.control_regions, witness=config.control_witness,
                cell_region=settings.cell_region, retain_data=config.retain_data)
            for function in functions:
                self.control.grant(function)
            for role in self.workers.roles.values():
                self.control.grant(role)
        # Job state events come from the jobs table's change stream (LEASEHOLD_EVENTS_FROM,
        # set by LeaseholdConfig.settings): the relay is the only process that publishes, so
        # it alone may put events on the bus; no other function or task is granted it.
        self.relay = Relay(self, "Relay", table=self.tables.jobs, bus=self.bus,
                           code=code_asset, environment=environment,
                           log_retention=log_retention)
        # It also hands off the jobs ``enqueue_item`` created in applications' transactions:
        # the message their submission would have sent, so it may send to the work queues.
        self.queues.grant_send(self.relay.function)
        # And it deletes what features keep per job in the coordination table (a durable
        # job's records, its ctx.once results) when the job's row is removed: that
        # table's Query and BatchWriteItem only.
        # First it reads whether the row exists again (a derived id made anew): the jobs
        # table's BatchGetItem only. (The tables' key already decrypts for it: the stream.)
        self.relay.function.add_to_role_policy(iam.PolicyStatement(
            actions=["dynamodb:Query", "dynamodb:BatchWriteItem"],
            resources=[self.tables.by_role["coordination"].table_arn]))
        self.relay.function.add_to_role_policy(iam.PolicyStatement(
            actions=["dynamodb:BatchGetItem"], resources=[self.tables.jobs.table_arn]))
        self.api: Api | HttpApiFront
        if config.api == "http":
            self.api = HttpApiFront(
                self, "HttpApi", handler=api_fn, log_retention=log_retention,
                throttle_rate=config.throttle_rate, throttle_burst=config.throttle_burst,
                cognito_user_pool_arn=config.cognito_user_pool_arn)
        else:
            self.api = Api(self, "Api", handler=api_fn, log_retention=log_retention,
                           throttle_rate=config.throttle_rate,
                           throttle_burst=config.throttle_burst,
                           cognito_user_pool_arn=config.cognito_user_pool_arn, waf=config.waf)
        self.api_function = api_fn

        self.monitoring = Monitoring(
            self, "Monitoring", key=self.queues.key, alarm_email=config.alarm_email,
            work_queues={q.node.id: q for q in self.queues.work.values()},
            dead_letter_queues={
                **{q.node.id: q for q in self.queues.dead.values()},
                "scheduling-dlq": self.scheduling.dlq,
                "trigger-dlq": self.triggers.dlq,
                "relay-dlq": self.relay.dlq,
            },
            workers=self.workers.functions, ticker=self.scheduling.ticker,
            sweeper=self.scheduling.sweeper, trigger=self.triggers.function,
            relay=self.relay.function,
            api_function=api_fn,
            api=self.api.rest_api if isinstance(self.api, Api) else self.api.http_api,
        )
        # A cell's failover alarms: its Region lease ageing, clients submitting to it for
        # tenants homed elsewhere.
        self.cell_alarms: CellAlarms | None = None
        if settings.cell_region:
            self.cell_alarms = CellAlarms(
                self, "CellAlarms", topic=self.monitoring.topic, region=settings.cell_region,
                lease_seconds=settings.region_lease_seconds, jobs_table=settings.jobs_table,
                replica_regions=config.jobs_replica_regions,
                replication_lag_seconds=config.replication_lag_alarm_seconds)
        apply_tracing(self, config.tracing)  # every function built above

    def pool(self, name: str) -> WorkerPool:
        """The pool ``name`` as a grantee (its Lambda role or ECS task role):
        ``bucket.grant_read(jobs.pool("batch"))``, ``jobs.pool("default").add_to_role_policy(
        statement)``. An unknown name raises ValueError, listing the pools."""
        if self.config.pool(name).kind == "external":  # the clear error for an unknown name
            raise ValueError(f"pool {name!r} is external: it has no role of its own; grant "
                             f"its workers with jobs.external_pool({name!r}).grant_lease(role)")
        return WorkerPool(name, self.workers.roles[name])

    def external_pool(self, name: str) -> ExternalPool:
        """The external pool ``name`` (``kind="external"``), to grant its workers:
        ``jobs.external_pool("images").grant_lease(role)``."""
        if self.config.pool(name).kind != "external":
            raise ValueError(f"pool {name!r} is not external; use jobs.pool({name!r})")
        return ExternalPool(name, self)

    def grant_lease(self, pool: str, grantee: iam.IRole) -> iam.Grant:
        """Let ``grantee`` (a role your workers in any language assume) work on ``pool``'s
        jobs over HTTP: ``execute-api:Invoke`` on the worker routes only, and its principal
        recorded for the API (``LEASEHOLD_WORKER_MAP``), which refuses every other caller
        on them (a tenant's API caller, another pool's worker) with 403."""
        if self.config.pool(pool).kind != "external":
            raise ValueError(f"grant_lease: pool {pool!r} is not external (kind='external')")
        if self.config.cognito_user_pool_arn:
            raise ValueError("grant_lease: the API authorizes with Cognito, so an IAM "
                             "worker would be refused; deploy workers with IAM auth")
        self._lease_grants.setdefault(grantee.role_arn, set()).add(pool)
        # Written again with every grant (the last one wins): every grant made so far.
        self.api_function.add_environment("LEASEHOLD_WORKER_MAP", cdk.Stack.of(
            self).to_json_string({arn: sorted(pools)
                                  for arn, pools in self._lease_grants.items()}))
        stage = STAGE if isinstance(self.api, Api) else "$default"
        front = self.api.rest_api if isinstance(self.api, Api) else self.api.http_api
        arns = [front.arn_for_execute_api(method="POST", path=path, stage=stage)
                for path in ("/workers/lease", "/jobs/*/heartbeat", "/jobs/*/complete",
                             "/jobs/*/fail")]
        return iam.Grant.add_to_principal(grantee=grantee, actions=["execute-api:Invoke"],
                                          resource_arns=arns)

    def grant_submit(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` (your function or role) call the API: ``execute-api:Invoke`` on
        every route of its stage. Its tenant is its principal (README, "Calling the API")."""
        if self.config.cognito_user_pool_arn:
            raise ValueError("grant_submit: the API authorizes with Cognito "
                             "(cognito_user_pool_arn), so an IAM grant admits nobody; "
                             "give the caller a user of that pool instead")
        if isinstance(self.api, Api):
            return grant_submit(self.api.rest_api, STAGE, grantee)
        return grant_submit(self.api.http_api, "$default", grantee)

    def grant_enqueue(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` commit the entries ``leasehold.enqueue_item`` builds in its own
        ``transact_write_items``: ``PutItem`` on the jobs table and ``UpdateItem`` on the
        tenants table, nothing else (and the tables' key, when customer-managed)."""
        grant_enqueue(self.tables, grantee)

    def environment_for(self, function: lambda_.Function) -> Mapping[str, str]:
        """Add to ``function`` the environment ``leasehold.compose.compose()`` reads (table
        names, queue prefix and URL base, pools, shards, task modules, ...); returns it.
        Its code must be able to import the task modules (``LEASEHOLD_TASKS``)."""
        for name, value in self.environment.items():
            function.add_environment(name, value)
        return self.environment
