"""One submission as ``POST /jobs`` answers it, shared by ``POST /jobs/batch`` for each of its
items: the same spec, the same rules (spec resolution, the intakes, admission), the same
answer."""

from __future__ import annotations

from dataclasses import dataclass, replace

from leasehold.api.answers import view
from leasehold.api.context import ApiConfig
from leasehold.api.models import SubmitJob, SubmittedJob
from leasehold.clock import iso, to_ms
from leasehold.core.policy import RetryPolicy
from leasehold.core.spec import JobSpec, resolve, targeted
from leasehold.flow import debounce
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.handoff import Pending
from leasehold.tenancy.admission import submit_admitted


def spec_from(body: SubmitJob, tenant: str) -> JobSpec:
    retry = None
    if body.retry is not None:
        retry = RetryPolicy.from_dict(body.retry.model_dump(exclude_none=True))
    return JobSpec(
        task=body.task or "", target=body.target, payload=body.payload, tenant=tenant,
        pool=body.pool,
        priority=body.priority, run_at_ms=None if body.run_at is None else to_ms(body.run_at),
        delay_seconds=body.delay_seconds, idempotency_key=body.idempotency_key,
        max_attempts=body.max_attempts, retry=retry, timeout_seconds=body.timeout_seconds,
        retention_days=body.retention_days,
        unique=None if body.unique is None else body.unique.model_dump(),
        debounce=None if body.debounce is None else body.debounce.model_dump(exclude_none=True),
        start_within_seconds=body.start_within_seconds,
        expires_at_ms=None if body.expires_at is None else to_ms(body.expires_at),
        labels=body.labels,
        concurrency=None if body.concurrency is None else body.concurrency.model_dump(),
        throttle=None if body.throttle is None else body.throttle.model_dump(),
        deadline_seconds=body.deadline_seconds,
    )


@dataclass(frozen=True)
class Prepared:
    """A submission checked and ready for admission: nothing written, no token spent."""

    spec: JobSpec
    pool: str
    warnings: tuple[str, ...] = ()
    #: It uses a flow-control gate (its own or its task's concurrency or throttle key).
    gated: bool = False


def prepare(app: Leasehold, tenant: str, body: SubmitJob, token: str | None) -> Prepared:
    """The submission's spec, resolved so that bad input is refused (a 422) before
    admission spends a token or anything is written. ``token``: the client's retry token
    (``Idempotency-Key``)."""
    spec = targeted(spec_from(body, tenant), app.registry)  # a target: its task's spec
    spec = replace(spec, idempotency_key=debounce.retry_key(app, spec, token))
    now = app.now()
    resolved = resolve(spec, app.registry, pools=app.settings.pools,
                       timeout_limits=app.settings.job_timeout_limits(), now_ms=now)
    warnings: tuple[str, ...] = ()
    if spec.run_at_ms is not None and spec.run_at_ms < now:
        warnings = (f"run_at {iso(spec.run_at_ms)} is in the past; the job runs now",)
    return Prepared(spec, resolved.pool, warnings, gated=resolved.gate is not None)


def admit(app: Leasehold, api: ApiConfig, prepared: Prepared, *, prepaid: bool = False,
          handoffs: list[Pending] | None = None) -> tuple[int, SubmittedJob]:
    """Admission and creation of a prepared submission, and its answer: 201 and the job it
    made, or 200 and the job that answered for it (an idempotent replay, a unique
    duplicate, a debounced submission coalesced). ``prepaid``: its token (and the backlog
    check) was taken by a batch already; ``handoffs``: the batch sends its hand-off."""
    limits = api.limits_for(app, prepared.spec.tenant)
    result = submit_admitted(app, prepared.spec, prepared.pool, limits, api.backlog,
                             api.buckets, prepaid=prepaid, handoffs=handoffs)
    shown = SubmittedJob(**view(result.job, app.now()).model_dump(by_alias=True),
                         warnings=list(prepared.warnings), duplicate=result.duplicate,
                         coalesced=result.coalesced)
    return 201 if result.created else 200, shown


def submit_one(app: Leasehold, api: ApiConfig, tenant: str, body: SubmitJob,
               token: str | None) -> tuple[int, SubmittedJob]:
    """One submission as ``POST /jobs`` answers it. Every rule is in :func:`prepare`,
    :func:`admit` or below (spec resolution, the intakes, admission), so ``POST
    /jobs/batch`` applies each of them to each of its items by calling those."""
    return admit(app, api, prepare(app, tenant, body, token))
