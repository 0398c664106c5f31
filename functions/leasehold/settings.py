"""Settings, read once from the environment into a frozen value. Explicit arguments win."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from leasehold.errors import ValidationError

PRIORITIES = ("high", "normal", "low")
#: What a Lambda worker keeps back from its function timeout: an attempt that times out still
#: needs a few seconds to write its outcome. A job may ask for at most the function timeout
#: minus this (:meth:`Settings.job_timeout_limit`); the worker starts a job only with its
#: timeout plus half of this left (:mod:`leasehold.lifecycle.consumer`).
FUNCTION_TIMEOUT_RESERVE_SECONDS = 10.0
#: Which job state changes are published to EventBridge (``LEASEHOLD_PUBLISH``, the stack's
#: ``LeaseholdConfig(events=...)``): the terminal ones only (SUCCEEDED, DEAD, CANCELLED),
#: every one, or none (``off``: no PutEvents at all). EventBridge bills $1.00 per million
#: events (batching saves requests, not event dollars): ``terminal`` costs $1.00 per million
#: jobs, ``all`` about $3.00 (queued, running, and the outcome), ``off`` nothing.
#: ``terminal`` is the default: consumers mostly react to outcomes, and a rule written for
#: them on a deployment whose events were off by default would receive nothing, silently.
#: A local event log (``leasehold dev``) costs nothing: under ``off`` it still gets every
#: change (:func:`leasehold.events.publishing.published`). ``none`` is the old name of ``off``.
PUBLISH_CHOICES = ("terminal", "all", "off")
EVENT_SOURCES = ("inline", "stream")
#: A tenant's admission limits as the deployment sets them (``LeaseholdConfig``'s
#: ``tenant_*``, ``leasehold dev --tenant-*``), the same on every function; a tenant's plan
#: row in the tenants table overrides its rate, burst and cap (``leasehold.tenancy.plans``).
DEFAULT_TENANT_RATE = 50.0
DEFAULT_TENANT_BURST = 200.0
DEFAULT_TENANT_MAX_LIVE = 10_000
DEFAULT_MAX_BACKLOG = 100_000


def _split(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


@dataclass(frozen=True, kw_only=True)
class Settings:
    region: str = "us-east-1"
    endpoint_url: str | None = None
    #: Version 2 of the jobs table (keyed by home and id, issue 46: ``aws.definitions.JOBS``).
    jobs_table: str = "leasehold-jobs-v2"
    schedules_table: str = "leasehold-schedules"
    tenants_table: str = "leasehold-tenants"
    coordination_table: str = "leasehold-coordination"
    workflows_table: str = "leasehold-workflows"
    queue_prefix: str = "leasehold"
    #: Explicit queue URLs by queue name; otherwise ``queue_url_base``/name, or looked up.
    queue_urls: Mapping[str, str] = field(default_factory=dict)
    #: ``https://sqs.<region>.<suffix>/<account>`` (set by the CDK stack): queue URLs are
    #: derived from it, so a function's environment does not grow with the number of queues
    #: (Lambda allows 4 KB in all) and needs no GetQueueUrl call.
    queue_url_base: str | None = None
    #: The Lambda function timeout of each Lambda pool (set by the CDK stack); a job asks for
    #: at most that minus a reserve. Pools not named here (ECS, local) have no such limit.
    pool_timeouts: Mapping[str, float] = field(default_factory=dict)
    pools: tuple[str, ...] = ("default",)
    shards: int = 8
    #: Partitions of each tenant's jobs (its homes in the jobs table, ``core.ids``; at most
    #: 1,024): every write of a job's row lands in its home, ~1,000 write units/s each, so
    #: 16 let one tenant run ~5,000 plain jobs/s (3 units each), 32 ~10,000; a listing page
    #: queries every one (its home and the index's entries of derived ids). Raise it freely
    #: (rows keep the shard they were written under, all below the new count); never lower
    #: it, or rows on the higher shards drop out of listings.
    tenant_shards: int = 16
    lease_seconds: float = 60.0
    #: How long a QUEUED job may wait for its hand-off before the sweeper re-sends it.
    handoff_seconds: float = 900.0
    #: Clock skew allowed between machines before a lease counts as expired.
    skew_grace_seconds: float = 5.0
    #: How often the sweeper looks again at a job parked for a concurrency slot, in case the
    #: wake-up from the write that freed a slot was lost (leasehold.flow).
    flow_recheck_seconds: float = 30.0
    #: A Lambda pool's SQS event source mappings, disabled while the pool is paused:
    #: ``pool=uuid;uuid;uuid,pool2=...`` (set by the CDK construct on the API function).
    event_source_mappings: str = ""
    max_crash_recoveries: int = 3
    history_limit: int = 32
    task_modules: tuple[str, ...] = ()
    event_bus: str | None = None
    #: Which job state changes go to ``event_bus`` (one of :data:`PUBLISH_CHOICES`).
    publish: str = "terminal"
    #: Days DynamoDB keeps a finished job or workflow before its TTL deletes it (0: forever).
    #: A job may ask for its own (``retention_days``). See leasehold.core.retention.
    retention_days: int = 30
    #: Where job state events come from (:data:`EVENT_SOURCES`): ``inline`` (the worker's
    #: batch, lost if it dies before PutEvents) or ``stream`` (the jobs table's change stream,
    #: through the relay in ``leasehold.streams``: an event for every committed change).
    events_from: str = "inline"
    #: Jobs with no code (``leasehold.targets``), as the deployment allows them
    #: (``LEASEHOLD_TARGETS``, JSON): ``http_allow``, ``http_hosts``, ``http_secrets``,
    #: ``aws_targets``, ``redact_headers``; read by ``leasehold.targets.config``.
    targets: Mapping[str, Any] = field(default_factory=dict)
    #: The role outbound calls run under (``LEASEHOLD_TARGETS_ROLE_ARN``; the construct's
    #: targets role, or the one ``leasehold dev`` makes in its emulator): ``sigv4`` and AWS
    #: targets assume it per job, never using this process's own credentials. None: such
    #: targets are refused (``leasehold.targets.credentials``).
    targets_role_arn: str | None = None
    #: The version of the task code this process runs (``LEASEHOLD_CODE_VERSION``): the
    #: bundle's content hash, set by the CDK construct; the task modules' source hash under
    #: ``leasehold dev``. Each job keeps the version of its first attempt, and each lease's
    #: history entry its own (issue 36). "": not known.
    code_version: str = ""
    #: Tasks run by workers in any language (``leasehold.remote``): pool -> task names
    #: (``LEASEHOLD_EXTERNAL_TASKS``, ``pool:task,task;pool:task``). Their pools have queues
    #: and no Python consumer; submissions accept their names.
    external_tasks: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: The pool built-in target tasks (``leasehold.http``, ``leasehold.aws``) run on
    #: (``LEASEHOLD_TARGETS_POOL``): a Python pool, never an external one. "": the first
    #: Python pool (:meth:`targets_runner`).
    targets_pool: str = ""
    #: Every tenant's admission limits unless its plan says otherwise (read by the API's
    #: admission and by a worker's ``ctx.spawn`` and ``enqueue_item`` alike, through
    #: ``leasehold.tenancy.plans.limits_for``): submissions per second and at once, live
    #: jobs (0: no cap), the pool backlog past which every submission gets 503, and the
    #: admission items a tenant is spread over (0: as many as its limits call for).
    tenant_rate: float = DEFAULT_TENANT_RATE
    tenant_burst: float = DEFAULT_TENANT_BURST
    tenant_max_live: int = DEFAULT_TENANT_MAX_LIVE
    max_backlog: int = DEFAULT_MAX_BACKLOG
    tenant_admission_shards: int = 0
    #: Per-task policies of external tasks (``LEASEHOLD_EXTERNAL_POLICIES``, JSON: task ->
    #: ``{"timeout_seconds", "max_attempts", "retry", "priority"}``), the defaults their jobs
    #: get as a Python task's decorator gives them; a job's own values win.
    external_policies: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Cells with a home Region (``leasehold.cells``, docs/regions.md): this cell's Region
    #: (``LEASEHOLD_CELL_REGION``; "": one Region, cells off), the control table, an MRSC
    #: global table that holds every tenant's home and each cell's Region lease
    #: (``LEASEHOLD_CONTROL_TABLE``), the Region of the replica this cell calls
    #: (``LEASEHOLD_CONTROL_REGION``; "": its own), and this cell's API URL, which a
    #: misdirected submission is pointed to (``LEASEHOLD_CELL_URL``); the control table's
    #: own endpoint (``LEASEHOLD_CONTROL_ENDPOINT``; "": the cell's, ``leasehold dev
    #: --regions`` gives it an emulator of its own).
    cell_region: str = ""
    control_table: str = ""
    control_region: str = ""
    cell_url: str = ""
    control_endpoint: str = ""
    #: How long a Region lease lasts, and how long a cell trusts what it read from the
    #: control table (a tenant's home, its own lease) before it reads again.
    region_lease_seconds: float = 30.0
    control_cache_seconds: float = 5.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        text = {
            "region": "AWS_REGION",
            "endpoint_url": "AWS_ENDPOINT_URL",
            "jobs_table": "LEASEHOLD_JOBS_TABLE",
            "schedules_table": "LEASEHOLD_SCHEDULES_TABLE",
            "tenants_table": "LEASEHOLD_TENANTS_TABLE",
            "coordination_table": "LEASEHOLD_COORDINATION_TABLE",
            "workflows_table": "LEASEHOLD_WORKFLOWS_TABLE",
            "queue_prefix": "LEASEHOLD_QUEUE_PREFIX",
            "event_bus": "LEASEHOLD_EVENT_BUS",
            "queue_url_base": "LEASEHOLD_QUEUE_URL_BASE",
            "publish": "LEASEHOLD_PUBLISH",
            "event_source_mappings": "LEASEHOLD_EVENT_SOURCE_MAPPINGS",
            "events_from": "LEASEHOLD_EVENTS_FROM",
            "code_version": "LEASEHOLD_CODE_VERSION",
            "targets_role_arn": "LEASEHOLD_TARGETS_ROLE_ARN",
            "targets_pool": "LEASEHOLD_TARGETS_POOL",
            "cell_region": "LEASEHOLD_CELL_REGION",
            "control_table": "LEASEHOLD_CONTROL_TABLE",
            "control_region": "LEASEHOLD_CONTROL_REGION",
            "cell_url": "LEASEHOLD_CELL_URL",
            "control_endpoint": "LEASEHOLD_CONTROL_ENDPOINT",
        }
        for name, var in text.items():
            if env.get(var):
                values[name] = env[var]
        if not values.get("region") and env.get("AWS_DEFAULT_REGION"):
            values["region"] = env["AWS_DEFAULT_REGION"]
        numbers = {
            "shards": ("LEASEHOLD_SHARDS", int),
            "tenant_shards": ("LEASEHOLD_TENANT_SHARDS", int),
            "lease_seconds": ("LEASEHOLD_LEASE_SECONDS", float),
            "handoff_seconds": ("LEASEHOLD_HANDOFF_SECONDS", float),
            "skew_grace_seconds": ("LEASEHOLD_SKEW_GRACE_SECONDS", float),
            "flow_recheck_seconds": ("LEASEHOLD_FLOW_RECHECK_SECONDS", float),
            "max_crash_recoveries": ("LEASEHOLD_MAX_CRASH_RECOVERIES", int),
            "history_limit": ("LEASEHOLD_HISTORY_LIMIT", int),
            "retention_days": ("LEASEHOLD_RETENTION_DAYS", int),
            "tenant_rate": ("LEASEHOLD_TENANT_RATE", float),
            "tenant_burst": ("LEASEHOLD_TENANT_BURST", float),
            "tenant_max_live": ("LEASEHOLD_TENANT_MAX_LIVE", int),
            "max_backlog": ("LEASEHOLD_MAX_BACKLOG", int),
            "tenant_admission_shards": ("LEASEHOLD_TENANT_ADMISSION_SHARDS", int),
            "region_lease_seconds": ("LEASEHOLD_REGION_LEASE_SECONDS", float),
            "control_cache_seconds": ("LEASEHOLD_CONTROL_CACHE_SECONDS", float),
        }
        for name, (var, kind) in numbers.items():
            if env.get(var):
                try:
                    values[name] = kind(env[var])
                except ValueError as exc:
                    raise ValidationError(var, f"not a number: {env[var]!r}") from exc
        if env.get("LEASEHOLD_POOLS"):
            values["pools"] = _split(env["LEASEHOLD_POOLS"])
        if env.get("LEASEHOLD_TASKS"):
            values["task_modules"] = _split(env["LEASEHOLD_TASKS"])
        if env.get("LEASEHOLD_QUEUE_URLS"):
            values["queue_urls"] = json.loads(env["LEASEHOLD_QUEUE_URLS"])
        if env.get("LEASEHOLD_TARGETS"):
            try:
                values["targets"] = json.loads(env["LEASEHOLD_TARGETS"])
            except ValueError as exc:
                raise ValidationError("LEASEHOLD_TARGETS", f"not JSON: {exc}") from exc
        if env.get("LEASEHOLD_POOL_TIMEOUTS"):
            values["pool_timeouts"] = _timeouts(env["LEASEHOLD_POOL_TIMEOUTS"])
        if env.get("LEASEHOLD_EXTERNAL_TASKS"):
            values["external_tasks"] = external_tasks(env["LEASEHOLD_EXTERNAL_TASKS"])
        if env.get("LEASEHOLD_EXTERNAL_POLICIES"):
            try:
                values["external_policies"] = json.loads(env["LEASEHOLD_EXTERNAL_POLICIES"])
            except ValueError as exc:
                raise ValidationError("LEASEHOLD_EXTERNAL_POLICIES", f"not JSON: {exc}") from exc
        values.update(overrides)
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.shards < 1:
            raise ValidationError("shards", "must be at least 1")
        if not 1 <= self.tenant_shards <= 1024:
            # A job id names its shard in two base32 digits (``core.ids.home``).
            raise ValidationError("tenant_shards", "must be 1 to 1024")
        if self.lease_seconds < 1:
            raise ValidationError("lease_seconds", "must be at least 1 second")
        if not self.pools:
            raise ValidationError("pools", "at least one pool is needed")
        for pool in self.external_tasks:
            if pool not in self.pools:
                raise ValidationError("external_tasks", f"pool {pool!r} is not one of the "
                                                        f"pools {', '.join(self.pools)}")
        self._validate_targets_pool()
        if self.cell_region and not self.control_table:
            raise ValidationError("LEASEHOLD_CONTROL_TABLE", "a cell (LEASEHOLD_CELL_REGION) "
                                  "needs the control table that holds its Region lease")
        if self.cell_region and not \
                0 < self.control_cache_seconds * 2 < self.region_lease_seconds:
            raise ValidationError("LEASEHOLD_REGION_LEASE_SECONDS", "a Region lease must "
                                  "outlast two reads of the control table's cache")
        if self.tenant_rate <= 0 or self.tenant_burst < 1:
            raise ValidationError("tenant_rate", "a tenant's rate must be above 0 and its "
                                  "burst at least 1")
        if self.tenant_max_live < 0 or self.max_backlog < 1 or self.tenant_admission_shards < 0:
            raise ValidationError("tenant_max_live", "a tenant's cap is 0 (none) or more, the "
                                  "backlog limit at least 1, the admission shards 0 (as "
                                  "needed) or more")
        check_external_policies(self.external_tasks, self.external_policies)
        if self.retention_days < 0:
            raise ValidationError("LEASEHOLD_RETENTION_DAYS", "must be 0 (keep finished jobs "
                                  "forever) or a number of days")
        if self.publish not in (*PUBLISH_CHOICES, "none"):
            raise ValidationError(
                "LEASEHOLD_PUBLISH", f"{self.publish!r} is not one of {', '.join(PUBLISH_CHOICES)} "
                "(which job state changes are published as events)")
        if self.events_from not in EVENT_SOURCES:
            raise ValidationError(
                "LEASEHOLD_EVENTS_FROM", f"{self.events_from!r} is not one of "
                f"{', '.join(EVENT_SOURCES)} (where job state events are published from)")
        for pool, seconds in self.pool_timeouts.items():
            if seconds <= FUNCTION_TIMEOUT_RESERVE_SECONDS:
                raise ValidationError(
                    "pool_timeouts", f"pool {pool!r}: a function timeout of {seconds:g}s leaves "
                    f"no time for a job after the {FUNCTION_TIMEOUT_RESERVE_SECONDS:g}s reserve")

    def python_pools(self) -> tuple[str, ...]:
        """The pools a Python worker consumes (every pool but the external ones)."""
        return tuple(pool for pool in self.pools if pool not in self.external_tasks)

    def targets_runner(self) -> str | None:
        """The pool target tasks run on: ``targets_pool``, else the first Python pool; None
        when there is no Python pool (targets are then off)."""
        return self.targets_pool or next(iter(self.python_pools()), None)

    def _validate_targets_pool(self) -> None:
        if self.targets_pool and self.targets_pool not in self.pools:
            raise ValidationError("targets_pool", f"{self.targets_pool!r} is not one of the "
                                                  f"pools {', '.join(self.pools)}")
        if self.targets_pool in self.external_tasks:
            raise ValidationError("targets_pool", f"{self.targets_pool!r} is an external pool: "
                                  "target tasks run on a Python worker; name a Python pool")
        if self.targets and not self.python_pools():
            raise ValidationError("targets", "jobs with no code (targets) run on a Python "
                                  f"pool, and every pool ({', '.join(self.pools)}) is external: "
                                  "add a Python pool, or remove the targets settings")

    def job_timeout_limit(self, pool: str) -> float | None:
        """The longest ``timeout_seconds`` a job of ``pool`` may ask for (None: no limit)."""
        seconds = self.pool_timeouts.get(pool)
        return None if seconds is None else seconds - FUNCTION_TIMEOUT_RESERVE_SECONDS

    def job_timeout_limits(self) -> dict[str, float]:
        """:meth:`job_timeout_limit` of every pool that has one."""
        return {pool: limit for pool in self.pool_timeouts
                if (limit := self.job_timeout_limit(pool)) is not None}

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    def to_env(self) -> dict[str, str]:
        """The environment that reproduces these settings in another process."""
        env = {
            "AWS_REGION": self.region,
            "LEASEHOLD_JOBS_TABLE": self.jobs_table,
            "LEASEHOLD_SCHEDULES_TABLE": self.schedules_table,
            "LEASEHOLD_TENANTS_TABLE": self.tenants_table,
            "LEASEHOLD_COORDINATION_TABLE": self.coordination_table,
            "LEASEHOLD_WORKFLOWS_TABLE": self.workflows_table,
            "LEASEHOLD_QUEUE_PREFIX": self.queue_prefix,
            "LEASEHOLD_POOLS": ",".join(self.pools),
            "LEASEHOLD_SHARDS": str(self.shards),
            "LEASEHOLD_TENANT_SHARDS": str(self.tenant_shards),
            "LEASEHOLD_LEASE_SECONDS": str(self.lease_seconds),
            "LEASEHOLD_HANDOFF_SECONDS": str(self.handoff_seconds),
            "LEASEHOLD_SKEW_GRACE_SECONDS": str(self.skew_grace_seconds),
            "LEASEHOLD_FLOW_RECHECK_SECONDS": str(self.flow_recheck_seconds),
            "LEASEHOLD_MAX_CRASH_RECOVERIES": str(self.max_crash_recoveries),
            "LEASEHOLD_HISTORY_LIMIT": str(self.history_limit),
            "LEASEHOLD_TASKS": ",".join(self.task_modules),
            "LEASEHOLD_PUBLISH": self.publish,
            "LEASEHOLD_RETENTION_DAYS": str(self.retention_days),
            "LEASEHOLD_EVENTS_FROM": self.events_from,
            "LEASEHOLD_TENANT_RATE": f"{self.tenant_rate:g}",
            "LEASEHOLD_TENANT_BURST": f"{self.tenant_burst:g}",
            "LEASEHOLD_TENANT_MAX_LIVE": str(self.tenant_max_live),
            "LEASEHOLD_MAX_BACKLOG": str(self.max_backlog),
        }
        if self.tenant_admission_shards:
            env["LEASEHOLD_TENANT_ADMISSION_SHARDS"] = str(self.tenant_admission_shards)
        if self.endpoint_url:
            env["AWS_ENDPOINT_URL"] = self.endpoint_url
        if self.code_version:
            env["LEASEHOLD_CODE_VERSION"] = self.code_version
        if self.cell_region:
            env.update({"LEASEHOLD_CELL_REGION": self.cell_region,
                        "LEASEHOLD_CONTROL_TABLE": self.control_table,
                        "LEASEHOLD_REGION_LEASE_SECONDS": f"{self.region_lease_seconds:g}",
                        "LEASEHOLD_CONTROL_CACHE_SECONDS": f"{self.control_cache_seconds:g}"})
            if self.control_region:
                env["LEASEHOLD_CONTROL_REGION"] = self.control_region
            if self.cell_url:
                env["LEASEHOLD_CELL_URL"] = self.cell_url
            if self.control_endpoint:
                env["LEASEHOLD_CONTROL_ENDPOINT"] = self.control_endpoint
        if self.targets_role_arn:
            env["LEASEHOLD_TARGETS_ROLE_ARN"] = self.targets_role_arn
        if self.queue_urls:
            env["LEASEHOLD_QUEUE_URLS"] = json.dumps(dict(self.queue_urls))
        if self.event_bus:
            env["LEASEHOLD_EVENT_BUS"] = self.event_bus
        if self.queue_url_base:
            env["LEASEHOLD_QUEUE_URL_BASE"] = self.queue_url_base
        if self.targets:
            env["LEASEHOLD_TARGETS"] = json.dumps(dict(self.targets), separators=(",", ":"),
                                                  sort_keys=True)
        if self.targets_pool:
            env["LEASEHOLD_TARGETS_POOL"] = self.targets_pool
        if self.external_tasks:
            env["LEASEHOLD_EXTERNAL_TASKS"] = ";".join(
                f"{pool}:{','.join(names)}" for pool, names in self.external_tasks.items())
        if self.external_policies:
            env["LEASEHOLD_EXTERNAL_POLICIES"] = json.dumps(
                {k: dict(v) for k, v in self.external_policies.items()},
                separators=(",", ":"), sort_keys=True)
        if self.pool_timeouts:
            env["LEASEHOLD_POOL_TIMEOUTS"] = ",".join(
                f"{pool}={seconds:g}" for pool, seconds in self.pool_timeouts.items())
        return env


#: What a policy of an external task may set (``Settings.external_policies``).
EXTERNAL_POLICY_KEYS = ("timeout_seconds", "max_attempts", "retry", "priority")


def external_tasks(value: str | list[str] | tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """``images:resize,crop;video:encode`` (or a list of ``POOL:TASK[,TASK]``) -> pool ->
    task names; a pool named twice gets the tasks of both."""
    return external_declarations(value)[0]


def external_declarations(value: str | list[str] | tuple[str, ...]
                          ) -> tuple[dict[str, tuple[str, ...]], dict[str, dict[str, Any]]]:
    """(pool -> task names, task -> policy) of ``POOL:TASK[,TASK]`` parts, or
    ``POOL:{"TASK": {POLICY}, ...}`` (a JSON object: each task with its policy, e.g.
    ``images:{"resize": {"timeout_seconds": 60, "max_attempts": 3}}``)."""
    parts = value.split(";") if isinstance(value, str) else list(value)
    out: dict[str, tuple[str, ...]] = {}
    policies: dict[str, dict[str, Any]] = {}
    for part in (p.strip() for p in parts):
        if not part:
            continue
        pool, _, names = part.partition(":")
        if names.strip().startswith("{"):
            try:
                declared = json.loads(names)
            except ValueError as exc:
                raise ValidationError("external", f"{part!r}: not a JSON object: {exc}"
                                      ) from exc
            if not isinstance(declared, dict) or not all(
                    isinstance(p, dict) for p in declared.values()):
                raise ValidationError("external", f"{part!r}: expected "
                                      '{"TASK": {"timeout_seconds": ...}, ...}')
            tasks = tuple(str(name) for name in declared)
            policies.update({str(name): dict(p) for name, p in declared.items() if p})
        else:
            tasks = tuple(n.strip() for n in names.split(",") if n.strip())
        if not pool.strip() or not tasks:
            raise ValidationError("external", f"expected POOL:TASK[,TASK], got {part!r}")
        out[pool.strip()] = (*out.get(pool.strip(), ()), *tasks)
    return out, policies


def check_external_policies(tasks: Mapping[str, tuple[str, ...]],
                            policies: Mapping[str, Mapping[str, Any]]) -> None:
    """Each policy names an external task and only what a policy may set (the values are
    checked where the tasks are registered, ``leasehold.remote.install``)."""
    known = {name for names in tasks.values() for name in names}
    for name, policy in policies.items():
        if name not in known:
            raise ValidationError("external_policies", f"{name!r} is not an external task")
        unknown = sorted(set(policy) - set(EXTERNAL_POLICY_KEYS))
        if unknown:
            raise ValidationError("external_policies", f"{name!r}: unknown {unknown}; a "
                                  f"policy sets {', '.join(EXTERNAL_POLICY_KEYS)}")


def _timeouts(value: str) -> dict[str, float]:
    """``default=300,gpu=900`` -> ``{"default": 300.0, "gpu": 900.0}``."""
    out: dict[str, float] = {}
    for part in _split(value):
        pool, _, seconds = part.partition("=")
        try:
            out[pool.strip()] = float(seconds)
        except ValueError as exc:
            raise ValidationError("LEASEHOLD_POOL_TIMEOUTS",
                                  f"expected pool=seconds, got {part!r}") from exc
    return out
