"""Workers: a Lambda per pool fed by its three priority queues, or an ECS Fargate service.

Lambda pools give each priority queue its own maximum concurrency, so a flood of low-priority
jobs cannot take the capacity high-priority jobs need. ECS pools run ``leasehold worker --pool P``
(a polling worker that takes the high queue first) and scale on the pool's queue depth.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from leasehold.cdk.config import LeaseholdConfig, PoolConfig
from leasehold.cdk.environment import pool_environment
from leasehold.cdk.functions import LeaseholdFunction
from leasehold.cdk.nag import acknowledge
from leasehold.cdk.network import Network
from leasehold.cdk.queues import Queues
from leasehold.cdk.secrets import grant_secrets
from leasehold.cdk.tables import Tables
from leasehold.settings import PRIORITIES

WORKER_HANDLER = "leasehold.handlers.worker.handler"
#: A private ECR image: ``<account>.dkr.ecr.<region>.amazonaws.com[.cn]/<repo>[:tag|@digest]``.
_ECR_IMAGE = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/"
    r"(?P<repository>[a-z0-9][a-z0-9._/-]*)(?::(?P<tag>[\w.-]+)|@(?P<digest>sha256:[0-9a-f]{64}))?$")


class Workers(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, pools: Sequence[PoolConfig],
                 queues: Queues, tables: Tables, code: lambda_.Code,
                 environment: Mapping[str, str], log_retention: logs.RetentionDays,
                 config: LeaseholdConfig,
                 built_image: ecs.ContainerImage | None = None) -> None:
        super().__init__(scope, construct_id)
        #: The deployment's network defaults (a pool may name its own).
        self._config = config
        #: The image of ECS pools that name none (built from the Lambda bundle).
        self._built_image = built_image
        self.functions: dict[str, lambda_.Function] = {}
        self.services: dict[str, ecs.FargateService] = {}
        self._queues = queues
        self._tables = tables
        #: One cluster per VPC; ``None``: the stack's own VPC.
        self._clusters: dict[str | None, ecs.Cluster] = {}
        #: Each pool's role: the Lambda function's, or the ECS task role.
        self.roles: dict[str, iam.IRole] = {}
        #: Each Lambda pool's SQS event source mappings (a paused pool disables them).
        self.mappings: dict[str, list[lambda_.EventSourceMapping]] = {}
        for pool in pools:
            if pool.kind == "external":
                continue  # its workers lease over HTTP (leasehold.remote): no consumer here
            # The deployment's settings, then the pool's own (checked not to collide).
            pool_env = {**environment, **pool_environment(pool)}
            if pool.kind == "lambda":
                self.functions[pool.name] = self._lambda_pool(
                    pool, code, pool_env, log_retention)
            else:
                self.services[pool.name] = self._ecs_pool(pool, pool_env, log_retention)
            grant_secrets(self, pool, self.roles[pool.name])

    def _lambda_pool(self, pool: PoolConfig, code: lambda_.Code,
                     environment: Mapping[str, str],
                     log_retention: logs.RetentionDays) -> lambda_.Function:
        network = Network.of(pool, self._config)
        worker = LeaseholdFunction(
            self, f"{pool.name}-worker", handler=WORKER_HANDLER, code=code,
            environment=environment, memory_mb=pool.memory_mb,
            timeout_seconds=pool.timeout_seconds, log_retention=log_retention,
            description=f"Leasehold worker for pool {pool.name}",
            vpc=network.vpc, subnets=network.subnets,
            security_groups=network.security_groups, layers=pool.layers,
        )
        fn = worker.function
        self.roles[pool.name] = worker.role
        for priority in PRIORITIES:
            fn.add_event_source(sources.SqsEventSource(
                self._queues.work[(pool.name, priority)],
                batch_size=pool.batch_size,
                # The handler returns batchItemFailures: one failed record is retried alone.
                report_batch_item_failures=True,
                max_concurrency=pool.concurrency[priority],
            ))
        self._grant_worker(fn)
        acknowledge(fn, "Serverless-LambdaDLQ",
                    "Invoked synchronously by SQS event source mappings, where a function DLQ "
                    "never applies; each source queue has its own redrive DLQ.")
        for mapping in fn.node.children:
            if isinstance(mapping, lambda_.EventSourceMapping):
                self.mappings.setdefault(pool.name, []).append(mapping)
                acknowledge(mapping, "Serverless-LambdaEventSourceMappingDestination",
                            "SQS event source mappings take no on-failure destination; a record "
                            "that keeps failing moves to the source queue's redrive DLQ.")
        return fn

    def _grant_worker(self, grantee: lambda_.Function | ecs.TaskDefinition) -> None:
        principal = grantee.task_role if isinstance(grantee, ecs.TaskDefinition) else grantee
        self._tables.grant_data(principal)
        # Retries re-send to the pool's queues; finished jobs may release dependents in other
        # pools; DEAD jobs are copied to their DLQ.
        self._queues.grant_send(principal)

    def _ecs_cluster(self, network: Network) -> ecs.Cluster:
        if network.vpc is not None:
            # The application's VPC: a cluster of its own there (ids by the VPC's address,
            # so that adding a pool with another VPC renames nothing).
            key = network.vpc.node.addr
            if key not in self._clusters:
                self._clusters[key] = ecs.Cluster(
                    self, f"Cluster-{key[:8]}", vpc=network.vpc,
                    container_insights_v2=ecs.ContainerInsights.ENABLED)
            return self._clusters[key]
        if None not in self._clusters:
            vpc = ec2.Vpc(
                self, "Vpc", max_azs=2, nat_gateways=0,
                # Public subnets with no inbound rules: workers only call AWS APIs, and this
                # avoids the hourly cost of NAT gateways.
                subnet_configuration=[ec2.SubnetConfiguration(
                    name="public", subnet_type=ec2.SubnetType.PUBLIC)],
                flow_logs={"rejected": ec2.FlowLogOptions(
                    traffic_type=ec2.FlowLogTrafficType.REJECT)},
            )
            vpc.add_gateway_endpoint("DynamoDb", service=ec2.GatewayVpcEndpointAwsService.DYNAMODB)
            self._clusters[None] = ecs.Cluster(
                self, "Cluster", vpc=vpc,
                container_insights_v2=ecs.ContainerInsights.ENABLED)
        return self._clusters[None]

    def _ecs_pool(self, pool: PoolConfig, environment: Mapping[str, str],
                  log_retention: logs.RetentionDays) -> ecs.FargateService:
        network = Network.of(pool, self._config)
        cluster = self._ecs_cluster(network)
        log_group = logs.LogGroup(self, f"{pool.name}-logs", retention=log_retention,
                                  removal_policy=cdk.RemovalPolicy.DESTROY)
        task = ecs.FargateTaskDefinition(
            self, f"{pool.name}-task", cpu=pool.cpu, memory_limit_mib=pool.memory_mb,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.ARM64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX))
        task.add_container(
            "worker",
            image=self._image(pool, task),
            command=["leasehold", "worker", "--pool", pool.name],
            environment=dict(environment),
            logging=ecs.LogDriver.aws_logs(stream_prefix=pool.name, log_group=log_group),
            # SIGTERM lets the worker stop leasing; the in-flight attempt finishes or its lease
            # expires and the sweeper re-drives it.
            stop_timeout=cdk.Duration.seconds(120),
        )
        self._grant_worker(task)
        self.roles[pool.name] = task.task_role
        self._grant_task_protection(pool, task, cluster)
        self._tables.acknowledge_index_grants(task.task_role)
        self._queues.grant_consume(task.task_role, self._queues.pool_queues(pool.name))
        if network.vpc is None:
            placement: dict[str, object] = {
                "assign_public_ip": True,
                "vpc_subnets": ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC)}
        else:
            # The application's subnets: a public IP only in public ones; private subnets
            # reach AWS through endpoints or a NAT gateway (docs/operations.md).
            placement = {"assign_public_ip": network.public, "vpc_subnets": network.subnets,
                         "security_groups": (list(network.security_groups)
                                             if network.security_groups is not None else None)}
        service = ecs.FargateService(
            self, f"{pool.name}-service", cluster=cluster, task_definition=task,
            desired_count=pool.min_tasks,
            circuit_breaker=ecs.DeploymentCircuitBreaker(rollback=True),
            **placement,  # type: ignore[arg-type]
        )
        # Scale out on the backlog (visible messages); scale in only when nothing is visible
        # *and* nothing is in flight. Visible messages alone are 0 while every job runs,
        # which stopped busy workers. In-flight work adds 0.5: no step (neither out nor in).
        # A task that runs jobs also protects itself from scale-in
        # (leasehold.polling.task_protection).
        metrics: dict[str, cloudwatch.IMetric] = {}
        for priority in PRIORITIES:
            queue = self._queues.work[(pool.name, priority)]
            metrics[priority] = queue.metric_approximate_number_of_messages_visible(
                period=cdk.Duration.minutes(1), statistic="Maximum")
            metrics[f"{priority}_in_flight"] = \
                queue.metric_approximate_number_of_messages_not_visible(
                    period=cdk.Duration.minutes(1), statistic="Maximum")
        in_flight = " + ".join(f"{priority}_in_flight" for priority in PRIORITIES)
        depth = cloudwatch.MathExpression(
            expression=f"high + normal + low + IF(({in_flight}) > 0, 0.5, 0)",
            using_metrics=metrics, period=cdk.Duration.minutes(1),
            label="backlog (+0.5 while jobs are in flight)",
        )
        scaling = service.auto_scale_task_count(
            min_capacity=pool.min_tasks, max_capacity=pool.max_tasks)
        scaling.scale_on_metric(
            "QueueDepth", metric=depth,
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            scaling_steps=[
                appscaling.ScalingInterval(upper=0, change=-1),
                appscaling.ScalingInterval(lower=1, change=+1),
                appscaling.ScalingInterval(lower=100, change=+3),
                appscaling.ScalingInterval(lower=1000, change=+10),
            ],
            cooldown=cdk.Duration.minutes(2),
        )
        acknowledge(task, "AwsSolutions-ECS2",
                    "The environment holds resource names, tuning values, the pool's plain "
                    "settings and the names of its secrets, never their values: the worker "
                    "reads those at start (leasehold.aws.secrets).")
        return service

    def _image(self, pool: PoolConfig, task: ecs.TaskDefinition) -> ecs.ContainerImage:
        """The pool's image; a private ECR image (named or built) also lets the execution
        role pull it."""
        if pool.image is None:
            assert self._built_image is not None  # Leasehold builds one for such pools
            self._acknowledge_pull(task)
            return self._built_image
        match = _ECR_IMAGE.match(pool.image)
        if match is None:
            return ecs.ContainerImage.from_registry(pool.image)
        repository = ecr.Repository.from_repository_attributes(
            self, f"{pool.name}-repository", repository_name=match["repository"],
            repository_arn=cdk.Stack.of(self).format_arn(
                service="ecr", resource="repository", resource_name=match["repository"],
                region=match["region"], account=match["account"]))
        # from_ecr_repository grants the task's execution role the pull (ECR's three image
        # actions on this repository, and GetAuthorizationToken).
        image = ecs.ContainerImage.from_ecr_repository(
            repository, tag=match["digest"] or match["tag"] or "latest")
        self._acknowledge_pull(task)
        return image

    @staticmethod
    def _acknowledge_pull(task: ecs.TaskDefinition) -> None:
        acknowledge(task.obtain_execution_role(), "AwsSolutions-IAM5[Resource::*]",
                    "ecr:GetAuthorizationToken, which the execution role needs to pull the "
                    "worker image, supports no resource-level permissions; the image actions "
                    "are granted on the one repository.")

    def _grant_task_protection(self, pool: PoolConfig, task: ecs.TaskDefinition,
                               cluster: ecs.Cluster) -> None:
        """Let the worker protect its own task from scale-in while it runs jobs."""
        tasks_arn = cdk.Stack.of(self).format_arn(
            service="ecs", resource="task", resource_name=f"{cluster.cluster_name}/*")
        task.add_to_task_role_policy(iam.PolicyStatement(
            actions=["ecs:UpdateTaskProtection", "ecs:GetTaskProtection"],
            resources=[tasks_arn]))
        # cdk-nag names the finding by the ARN as written, with the cluster's logical id.
        stack = cdk.Stack.of(self)
        cluster_id = stack.resolve(stack.get_logical_id(
            cluster.node.default_child))  # type: ignore[arg-type]
        finding = ("AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ecs:<AWS::Region>:"
                   f"<AWS::AccountId>:task/<{cluster_id}>/*]")
        acknowledge(task, finding,
                    "Task ids exist only at run time: a worker protects its own task, "
                    f"in pool {pool.name}'s cluster only.")
