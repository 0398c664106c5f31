"""Routes for flow control: your concurrency keys, and pausing or resuming one."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path

from leasehold.api import context
from leasehold.api.answers import answers
from leasehold.api.context import Forbidden
from leasehold.api.models import TEXT
from leasehold.api.ops_models import FlowKeyOut, FlowKeysOut, PoolPauseOut
from leasehold.core.spec import POOL_PATTERN
from leasehold.errors import ValidationError
from leasehold.flow import key_usage as keys
from leasehold.flow import pools

router = Router()

#: A key may hold any character but a control one (``stripe:acct/1``): clients send it
#: percent-encoded as one segment; the router matches it undecoded and decodes it
#: (``leasehold.api.app``).
Key = Annotated[str, Path(min_length=1, max_length=200, pattern=TEXT)]


def key_out(usage: keys.KeyUsage) -> FlowKeyOut:
    return FlowKeyOut(key=usage.key, in_use=usage.in_use, limit=usage.limit,
                      paused=usage.paused, waiting=usage.waiting,
                      waiting_jobs=list(usage.waiting_jobs))


@router.get("/flow/keys", summary="Your concurrency keys: in use, limit, waiting",
            tags=["flow"], responses=answers(FlowKeysOut, 401, 422))
def list_keys() -> FlowKeysOut:
    app = context.leasehold(router)
    return FlowKeysOut(keys=[key_out(k) for k in keys.keys(app, context.tenant(router))])


@router.get("/flow/keys/<key>", summary="One of your concurrency keys", tags=["flow"],
            responses=answers(FlowKeyOut, 401, 422))
def get_key(key: Key) -> FlowKeyOut:
    app = context.leasehold(router)
    return key_out(keys.usage(app, context.tenant(router), key))


@router.post("/flow/keys/<key>/pause", summary="Pause a concurrency key", tags=["flow"],
             description="No job with the key starts until it is resumed; running ones "
                         "finish, waiting ones stay parked, nothing is lost.",
             responses=answers(FlowKeyOut, 401, 422))
def pause_key(key: Key) -> FlowKeyOut:
    app = context.leasehold(router)
    return key_out(keys.pause(app, context.tenant(router), key))


@router.post("/flow/keys/<key>/resume", summary="Resume a concurrency key", tags=["flow"],
             description="Wakes as many waiting jobs as the key has free slots.",
             responses=answers(FlowKeyOut, 401, 422))
def resume_key(key: Key) -> FlowKeyOut:
    app = context.leasehold(router)
    return key_out(keys.resume(app, context.tenant(router), key))


def _pool(pool: str) -> str:
    app = context.leasehold(router)
    if pool not in app.settings.pools:
        raise ValidationError("pool", f"unknown pool {pool!r}; known: "
                                      f"{', '.join(app.settings.pools)}")
    tenant = context.tenant(router)
    if tenant not in context.config(router).operators:
        raise Forbidden(f"pools are shared: only an operator may pause or resume one "
                        f"(LEASEHOLD_OPERATORS), not tenant {tenant!r}")
    return pool


Pool = Annotated[str, Path(min_length=1, max_length=32, pattern=POOL_PATTERN)]


@router.post("/pools/<pool>/pause", summary="Pause a pool (operators)", tags=["flow"],
             description="Its workers receive nothing until it is resumed; queued work "
                         "waits, nothing is lost. A Lambda pool's event source mappings are "
                         "disabled, so a paused pool costs nothing.",
             responses=answers(PoolPauseOut, 401, 403, 422))
def pause_pool(pool: Pool) -> PoolPauseOut:
    name = _pool(pool)
    return PoolPauseOut(pool=name, paused=pools.set_paused(context.leasehold(router), name, True))


@router.post("/pools/<pool>/resume", summary="Resume a pool (operators)", tags=["flow"],
             responses=answers(PoolPauseOut, 401, 403, 422))
def resume_pool(pool: Pool) -> PoolPauseOut:
    name = _pool(pool)
    return PoolPauseOut(pool=name, paused=pools.set_paused(context.leasehold(router), name,
                                                           False))
