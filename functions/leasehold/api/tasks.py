"""``GET /tasks`` and ``GET /tasks/{name}``: the deployment's tasks, each with its pool and the
JSON Schema of its input and output (null for an untyped task), for clients and the console's
submit form. The same for every tenant: they hold the deployment's code, no tenant's data."""

from __future__ import annotations

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.openapi.params import Path
from pydantic import BaseModel, Field

from leasehold.api import context
from leasehold.api.answers import answers
from leasehold.core.registry import INTERNAL_PREFIX, TaskDefinition, TaskRegistry
from leasehold.core.schemas import json_schema
from leasehold.core.spec import NAME_PATTERN
from leasehold.errors import NotFound

router = Router()


class TaskOut(BaseModel):
    name: str
    pool: str = Field(description="the pool its jobs run in unless a submission names another")
    priority: str
    max_attempts: int
    timeout_seconds: float
    input: dict[str, Any] | None = Field(
        description="the JSON Schema a payload must fit (`@task(..., input=Model)`), checked "
                    "at every submission; null: any JSON")
    output: dict[str, Any] | None = Field(
        description="the JSON Schema of the result as stored (`output=`); null: any JSON")


class TasksOut(BaseModel):
    tasks: list[TaskOut] = Field(description="by name")


def task_out(definition: TaskDefinition) -> TaskOut:
    return TaskOut(name=definition.name, pool=definition.pool, priority=definition.priority,
                   max_attempts=definition.max_attempts,
                   timeout_seconds=definition.timeout_seconds,
                   input=json_schema(definition.input, "validation"),
                   output=json_schema(definition.output, "serialization"))


def public(registry: TaskRegistry) -> list[TaskDefinition]:
    """The tasks a caller may submit (Leasehold's own, such as bulk actions, are not)."""
    return [registry.get(name) for name in registry.names()
            if not name.startswith(INTERNAL_PREFIX)]


@router.get("/tasks", summary="The deployment's tasks with their input and output schemas",
            tags=["tasks"], responses=answers(TasksOut, 401))
def list_tasks() -> TasksOut:
    app = context.leasehold(router)
    context.tenant(router)  # an identity, as every route; no tenant's data is read
    return TasksOut(tasks=[task_out(d) for d in public(app.registry)])


@router.get("/tasks/<name>", summary="One task with its input and output schemas",
            tags=["tasks"], responses=answers(TaskOut, 401, 404, 422))
def get_task(name: Annotated[str, Path(pattern=NAME_PATTERN, max_length=128)]) -> TaskOut:
    app = context.leasehold(router)
    context.tenant(router)
    if name.startswith(INTERNAL_PREFIX) or name not in app.registry:
        raise NotFound(f"no task {name!r}", task=name)
    return task_out(app.registry.get(name))
