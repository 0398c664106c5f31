"""Jobs with no code: an HTTP call or an AWS action, run as a built-in task.

A target is not user code. A job that gives ``target`` instead of ``task`` is resolved, in
the one spec resolution every way of making a job shares (``core.spec.resolve``), into a job
of the built-in task ``leasehold.http`` or ``leasehold.aws`` whose payload is the checked
target. It then runs in the worker like any handler: leases, retries (with ``Retry-After``),
flow control (a concurrency key ``http:{host}`` by default), dead letters, redrive and events
apply unchanged. The lifecycle never imports this package: :func:`install` (called by
``compose.py``) registers the kinds on the registry and equips each attempt with this
deployment's callers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from leasehold.core.context import JobContext
from leasehold.core.registry import TargetKind, TaskDefinition, TaskRegistry
from leasehold.errors import InvalidPayload
from leasehold.lifecycle.app import Leasehold
from leasehold.targets import aws, http_spec
from leasehold.targets.config import TargetConfig
from leasehold.targets.credentials import RoleClients, TargetCredentials, Who
from leasehold.targets.http_call import Caller, call
from leasehold.targets.secrets import SecretReader
from leasehold.targets.signing import Signer

HTTP_TASK = "leasehold.http"
AWS_TASK = "leasehold.aws"
SERVICE = "targets"


class Targets:
    """One deployment's callers, put on each attempt's context (``ctx._services``)."""

    def __init__(self, app: Leasehold, caller: Caller | None = None) -> None:
        self.config = TargetConfig.from_settings(app.settings)
        # Outbound calls carry the targets role's credentials, never the worker's own.
        self.credentials = TargetCredentials(app.settings.targets_role_arn, app.clients)
        self.signer = Signer(self.config, self.credentials, app.settings.region)
        # Without a role (plain library use) a deployment's named secret is read as before,
        # with this process's credentials: the read names no tenant-chosen resource.
        reader = SecretReader(self.config, app.clients if self.credentials.role_arn is None
                              else RoleClients(self.credentials))
        self.caller = caller or Caller(self.config, now_ms=app.clock.now_ms, secret=reader.read,
                                       sign=self.signer)


def _targets(ctx: JobContext) -> Targets:
    found = ctx._services.get(SERVICE)
    if not isinstance(found, Targets):
        raise InvalidPayload("this worker was not composed with leasehold.targets")
    return found


def run_http(payload: Any, ctx: JobContext) -> Any:
    targets = _targets(ctx)
    # Signed, if at all, by the deployment's signer in this job's own session.
    return call(replace(targets.caller, sign=partial(targets.signer, who=_who(ctx))), payload,
                tenant=ctx.tenant)


def run_aws(payload: Any, ctx: JobContext) -> Any:
    targets = _targets(ctx)
    return aws.call(targets.config, targets.credentials, payload, _who(ctx))


def _who(ctx: JobContext) -> Who:
    return Who(tenant=ctx.tenant, job_id=ctx.job_id)


def install(app: Leasehold, *, caller: Callable[[Targets], Caller] | None = None) -> Targets:
    """Register the ``http`` and ``aws`` kinds on ``app``'s registry and equip its attempts.

    The kinds run on the deployment's targets pool (``Settings.targets_runner``: the one it
    names, else its first Python pool), never on an external pool, whose remote workers
    would be handed the built-in task. A deployment with no Python pool has no targets
    (``Settings.validate`` refuses one that configures them). ``caller`` (tests): builds
    the HTTP caller (a resolver or connector of the test's own).
    """
    targets = Targets(app)
    if caller is not None:
        targets.caller = caller(targets)
    pool = app.settings.targets_runner()
    if pool is not None:
        register(app.registry, targets.config, pool, pools=app.settings.python_pools())
    app.contexts.append(partial(_equip, targets))
    return targets


def register(registry: TaskRegistry, config: TargetConfig, pool: str, *,
             pools: tuple[str, ...] = ()) -> None:
    """The kinds and their built-in tasks on ``registry``, checked against ``config``: they
    run on ``pool``, and a job may name another of ``pools`` (the Python pools).

    A registry shared by several applications (the process's default one) checks
    submissions against the last one composed; each attempt runs with its own app's
    callers (:func:`_equip`)."""
    registry.targets["http"] = TargetKind(
        task=HTTP_TASK, pools=pools,
        prepare=lambda value, tenant: _on(pool, http_spec.prepare(config, value, tenant)))
    registry.targets["aws"] = TargetKind(
        task=AWS_TASK, pools=pools,
        prepare=lambda value, tenant: _on(pool, aws.prepare(config, value)))
    for name, fn in ((HTTP_TASK, run_http), (AWS_TASK, run_aws)):
        if name not in registry:
            registry.register(TaskDefinition(
                name=name, fn=fn, pool=pool,
                timeout_seconds=http_spec.DEFAULT_TIMEOUT_SECONDS + http_spec.CALL_SLACK_SECONDS))


def _on(pool: str, prepared: tuple[Any, dict[str, Any]]) -> tuple[Any, dict[str, Any]]:
    payload, defaults = prepared
    return payload, {**defaults, "pool": pool}


def _equip(targets: Targets, app: Leasehold, ctx: JobContext) -> None:
    ctx._services[SERVICE] = targets
