"""Routes for durable jobs: complete or fail a callback, list a job's steps, and read its
history for ``leasehold replay`` (issue 36).

``POST /callbacks/{token}`` takes the value as its whole body (any JSON). The token names its
job and callback and holds a 128-bit secret; a token of another tenant answers 404 like one
that does not exist. A repeat changes nothing and says so (``"changed": false``).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import BaseModel, Field

from leasehold.api import context
from leasehold.api.answers import answers, links
from leasehold.api.models import _Strict
from leasehold.durable import callbacks, replay
from leasehold.errors import ValidationError
from leasehold.lifecycle import control

router = Router()
Token = Annotated[str, Path(min_length=8, max_length=300,
                            pattern=r"^[0-9A-Za-z]+:[0-9a-f]{32}:[A-Za-z0-9][A-Za-z0-9_.:-]*$")]
JobId = Annotated[str, Path(min_length=1, max_length=64, pattern=r"^[0-9A-Za-z]+$")]


class CompletionOut(BaseModel):
    job_id: str
    callback: str
    outcome: str = Field(description="completed, failed or timed_out")
    changed: bool = Field(description="false: it had this outcome already; nothing changed")


class FailIn(_Strict):
    error: str = Field(min_length=1, max_length=2000)


class StepsOut(BaseModel):
    job_id: str
    steps: list[dict[str, Any]]


class HistoryOut(BaseModel):
    job: dict[str, Any] = Field(description="the job, as GET /jobs/{job_id} shows it")
    records: list[dict[str, Any]] = Field(
        description="its steps, sleeps, callbacks, spawns and patch markers, in the order of "
                    "the calls that wrote them (seq)")
    children: dict[str, dict[str, Any]] = Field(
        description="its children's states, results and errors, by id")


def _value() -> Any:
    body = router.current_event.body
    if body is None or not body.strip():
        return None
    try:
        return json.loads(body)
    except ValueError as exc:
        raise ValidationError("body", f"must be JSON (the callback's value): {exc}") from None


@router.post("/callbacks/<token>", summary="Complete a callback with a value (the body)",
             tags=["durable"], responses=answers(CompletionOut, 400, 401, 404, 409, 413, 422))
def complete_callback(token: Token) -> CompletionOut:
    done = callbacks.complete(context.leasehold(router), token, context.tenant(router),
                              value=_value())
    return CompletionOut.model_validate(done.view())


@router.post("/callbacks/<token>/fail", summary="Fail a callback with an error",
             tags=["durable"], responses=answers(CompletionOut, 401, 404, 409, 422))
def fail_callback(token: Token, body: FailIn) -> CompletionOut:
    done = callbacks.complete(context.leasehold(router), token, context.tenant(router),
                              error=body.error)
    return CompletionOut.model_validate(done.view())


@router.get("/jobs/<job_id>/steps", summary="A durable job's steps, sleeps and callbacks",
            tags=["durable"], responses=answers(
                StepsOut, 401, 404, 422,
                # An open callback's token (the first record of a job waiting on one).
                links=links("token", "$response.body#/steps/0/token",
                            "POST /callbacks/{token}", "POST /callbacks/{token}/fail")))
def job_steps(job_id: JobId) -> StepsOut:
    app = context.leasehold(router)
    control.get_job(app, job_id, context.tenant(router))  # 404 for another tenant's job
    return StepsOut(job_id=job_id, steps=callbacks.job_records(app, job_id))


@router.get("/jobs/<job_id>/history", summary="A durable job's history, for leasehold replay",
            tags=["durable"], responses=answers(HistoryOut, 401, 404, 422))
def job_history(job_id: JobId) -> HistoryOut:
    app = context.leasehold(router)
    job = control.get_job(app, job_id, context.tenant(router))  # 404: another tenant's
    return HistoryOut.model_validate(replay.document(app, job))
