"""``POST /jobs/batch``: up to :data:`MAX_BATCH` submissions in one request, each answered on
its own.

Each item is a ``POST /jobs`` body and goes through the same code as one
(:func:`~leasehold.api.submissions.prepare` and ``admit``): spec resolution, the intakes (unique,
debounce, flow control, typed inputs) and admission, one item at a time, so a rule applies
to an item exactly as it would to a single submission and there is no second copy of any
rule. An item refused (invalid, over the tenant's rate or cap, a conflict) is answered with
its own error and never stops the others; the request as a whole is refused (and nothing
written) only when its envelope is: not an object of ``jobs``, no items or more than
:data:`MAX_BATCH`, an item that is not an object.

The answer is 200 with one result per item, in order, each with the status ``POST /jobs``
would have answered, as SQS ``SendMessageBatch`` answers 200 with each entry's outcome:
the caller reads ``failed`` (or each result) rather than the HTTP status. Not 207
Multi-Status: that is WebDAV's, with an XML body of its own.
"""

from __future__ import annotations

import contextvars
import logging
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Annotated, Any

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Header
from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, Field
from pydantic import ValidationError as Invalid

from leasehold.api import context
from leasehold.api.answers import answers
from leasehold.api.context import ApiConfig
from leasehold.api.errors import described, invalid
from leasehold.api.models import ErrorDetail, SubmitJob, SubmittedJob, _Strict
from leasehold.api.submissions import Prepared, admit, prepare
from leasehold.aws.queues import MAX_BATCH_ENTRIES
from leasehold.errors import LeaseholdError, Overloaded, RateLimited
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy import tokens

log = logging.getLogger(__name__)
router = Router()

#: Items in one request, as API Gateway's 29 s and one Lambda invocation allow comfortably
#: (each item is one or two writes and a send, a few milliseconds each).
MAX_BATCH = 100
#: Items of one batch written side by side (:func:`_independent`): as many as one
#: ``SendMessageBatch`` carries, so their send-first hand-offs go in one request.
PARALLEL_WRITES = MAX_BATCH_ENTRIES
#: An ``Idempotency-Key`` for a batch: item ``i``'s retry token is ``{key}/{i}`` (at most
#: 256 characters, an item key's limit).
MAX_BATCH_TOKEN = 252


class SubmitBatch(_Strict):
    jobs: list[dict[str, Any]] = Field(
        min_length=1, max_length=MAX_BATCH,
        description=f"1 to {MAX_BATCH} submissions, each a `POST /jobs` body "
                    "(`idempotency_key` included); an item that is not a valid one is "
                    "answered with its own 422 in `results`, and the others still go in",
        json_schema_extra={"items": {"anyOf": [{"$ref": "#/components/schemas/SubmitJob"},
                                               {"type": "object"}]}})


class BatchResult(BaseModel):
    index: int = Field(description="the item's place in `jobs`, from 0")
    status: int = Field(description="what `POST /jobs` would have answered for it: 201 "
                                    "created; 200 an existing job answered (an idempotent "
                                    "replay, a unique duplicate, a debounced submission "
                                    "coalesced); 4xx or 5xx its error")
    job: SubmittedJob | None = Field(default=None, description="the job (201 and 200)")
    error: ErrorDetail | None = Field(
        default=None, description="the item's error; its `field` starts with `jobs[i]`")
    retry_after: int | None = Field(
        default=None, description="429 and 503: seconds before the item is worth sending "
                                  "again (with the same idempotency key or batch key)")


class BatchOut(BaseModel):
    results: list[BatchResult] = Field(description="one per item, in order")
    created: int = Field(description="items answered 201")
    existing: int = Field(description="items answered 200")
    failed: int = Field(description="items answered with an error")


@router.post(
    "/jobs/batch", summary="Submit up to 100 jobs, each answered on its own", tags=["jobs"],
    description=(
        "Each item goes through everything `POST /jobs` does (validation, unique, "
        "debounce, flow control, idempotency, the tenant's rate and live-job cap), as if "
        "submitted alone and in order: a refused item (422, 409, 429, ...) is answered in "
        "`results` and the others still go in. The request is refused whole (422, nothing "
        "written) only for a body that is not `{\"jobs\": [...]}` with 1 to 100 objects. "
        "Send a batch again after a lost answer with the same `Idempotency-Key` (or the "
        "same items' `idempotency_key`s): each job is made once."),
    responses=answers(BatchOut, 400, 401, 413, 422),
)
def submit_batch(
    body: SubmitBatch,
    idempotency_key: Annotated[str | None, Header(
        alias="Idempotency-Key", max_length=MAX_BATCH_TOKEN,
        description="a retry token for the whole batch: item `i` is submitted with the "
                    "token `{key}/{i}`, as `POST /jobs`' header (an item's own "
                    "`idempotency_key` wins)")] = None,
) -> BatchOut:
    app, api = context.leasehold(router), context.config(router)
    tenant = context.tenant(router)  # every item is the caller's: an item names no tenant
    items = [_prepared(app, tenant, index, item,
                       None if idempotency_key is None else f"{idempotency_key}/{index}")
             for index, item in enumerate(body.jobs)]
    prepaid = not api.limits_for(app, tenant).capped
    if prepaid:
        items = _paid(app, api, tenant, items)
    pending: list[handoff.Pending] = []

    def answer(index: int, item: Prepared | BatchResult) -> BatchResult:
        if isinstance(item, BatchResult):
            return item
        return _admitted(app, api, index, item, prepaid=prepaid, handoffs=pending)

    if prepaid and _independent(items):
        # Paid for and sharing no key, the items' writes cannot meet: write them side by
        # side, ten at a time (the function's time is mostly their round trips), the
        # hand-offs of those that send first gathered into one request before their puts.
        # Each runs in a copy of the request's context (its trace).
        results = []
        with ThreadPoolExecutor(PARALLEL_WRITES) as writers:
            for start in range(0, len(items), PARALLEL_WRITES):
                gather = handoff.Gather(app.queues, len(items[start:start + PARALLEL_WRITES]))
                futures = [writers.submit(contextvars.copy_context().run, gather.run, index,
                                          partial(answer, start + index, item))
                           for index, item in enumerate(items[start:start + PARALLEL_WRITES])]
                results += [future.result() for future in futures]
    else:
        results = [answer(index, item) for index, item in enumerate(items)]
    # Sent in the items' order, whichever write finished first (a worker meets them in it).
    order = {r.job.job_id: r.index for r in results if r.job is not None}
    pending.sort(key=lambda hand: order.get(hand.job.job_id, len(order)))
    handoff.send_all(app.queues, pending)  # ten hand-offs a request; the rows are the outbox
    return BatchOut(results=results,
                    created=sum(1 for r in results if r.status == 201),
                    existing=sum(1 for r in results if r.status == 200),
                    failed=sum(1 for r in results if r.status >= 400))


def _independent(items: list[Prepared | BatchResult]) -> bool:
    """No two items could meet in a write, so their order cannot change an answer: no flow
    option (a unique or debounce key, or a concurrency or throttle gate, the job's or its
    task's) and no idempotency key twice.
    (A capped tenant's items are never written side by side: the cap admits them in order.)"""
    specs = [item.spec for item in items if isinstance(item, Prepared)]
    keys = [spec.idempotency_key for spec in specs if spec.idempotency_key is not None]
    return len(keys) == len(set(keys)) and not any(
        item.gated or item.spec.unique or item.spec.debounce
        for item in items if isinstance(item, Prepared))


def _prepared(app: Leasehold, tenant: str, index: int, item: dict[str, Any],
              token: str | None) -> Prepared | BatchResult:
    """Item ``index`` checked as ``POST /jobs`` checks its body (nothing written), or its
    error."""
    try:
        return prepare(app, tenant, SubmitJob.model_validate(item), token)
    except Invalid as exc:
        status, error = invalid(exc.errors())
        return _failed(index, status, error)
    except LeaseholdError as exc:
        return _refused(index, exc)


def _paid(app: Leasehold, api: ApiConfig, tenant: str,
          items: list[Prepared | BatchResult]) -> list[Prepared | BatchResult]:
    """The items of a tenant without a cap, their tokens taken for the whole batch at once
    (:mod:`leasehold.tenancy.tokens`: one update per admission item instead of one per
    job), in order: the first items the rate admits go on, the rest are answered 429 as
    single submissions over the rate would be. A pool over its backlog answers 503 first."""
    out = list(items)
    limits = api.limits_for(app, tenant)
    if api.backlog is not None:
        for pool in {item.pool for item in out if isinstance(item, Prepared)}:
            try:
                api.backlog.check(app, pool, limits)
            except Overloaded as exc:
                out = [_refused(i, exc) if isinstance(item, Prepared) and item.pool == pool
                       else item for i, item in enumerate(out)]
    ready = [i for i, item in enumerate(out) if isinstance(item, Prepared)]
    granted = tokens.take(app, tenant, limits, len(ready), api.buckets)
    refusal: LeaseholdError = Overloaded(
        f"tenant {tenant!r}'s admission items did not answer; send these items again",
        retry_after=1) if granted.unanswered else RateLimited(
        f"tenant {tenant!r} is over its rate of {limits.rate:g} submissions/s (burst "
        f"{limits.burst:g})", retry_after=granted.retry_after)
    for i in ready[granted.count:]:
        out[i] = _refused(i, refusal)
    return out


def _admitted(app: Leasehold, api: ApiConfig, index: int, item: Prepared, *, prepaid: bool,
              handoffs: list[handoff.Pending]) -> BatchResult:
    """A prepared item admitted and written as ``POST /jobs`` would, and its answer."""
    try:
        status, shown = admit(app, api, item, prepaid=prepaid, handoffs=handoffs)
    except LeaseholdError as exc:
        return _refused(index, exc)
    except (ClientError, BotoCoreError):
        # The store or a queue still failing past botocore's retries (a throttle, a lost
        # connection): this item only. Its write may have landed; sent again with the same
        # key it is recognised (one job per key), so it is worth another try.
        log.warning("batch item %d failed", index, exc_info=True)
        return _failed(index, 503, {"code": "unavailable", "message": "the store did not "
                                    "answer; send this item again with the same key"}, 1)
    return BatchResult(index=index, status=status, job=shown)


def _refused(index: int, exc: LeaseholdError) -> BatchResult:
    status, error, headers = described(exc)
    wait = headers.get("Retry-After")
    return _failed(index, status, error, None if wait is None else int(wait))


def _failed(index: int, status: int, error: dict[str, Any],
            retry_after: int | None = None) -> BatchResult:
    """The item's error, its field (and the field in its message) under ``jobs[i]``."""
    where = f"jobs[{index}]"
    field, message = error.get("field"), str(error["message"])
    if field:
        if message.startswith(f"{field}: "):
            message = f"{where}.{message}"
        field = f"{where}.{field}"
    else:
        field, message = where, f"{where}: {message}"
    return BatchResult(index=index, status=status, retry_after=retry_after,
                       error=ErrorDetail(code=error["code"], message=message, field=field))
