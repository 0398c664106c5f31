"""Typed task inputs and outputs, without AWS: the model checks, their messages in the API's
field syntax, the registry's refusal of a non-model, and ``run_task`` doing as the worker."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from leasehold.core.context import JobContext
from leasehold.core.registry import TaskRegistry
from leasehold.core.schemas import check_input, json_schema, task_input, task_output
from leasehold.core.spec import JobSpec, resolve
from leasehold.errors import (
    InvalidInput,
    InvalidPayload,
    InvalidResult,
    NonRetryableError,
    ValidationError,
)
from leasehold.testing import run_task


class Item(BaseModel):
    sku: str
    count: int = Field(ge=1)


class Order(BaseModel):
    customer: str
    items: list[Item]


class Receipt(BaseModel):
    total: int


@pytest.mark.parametrize(("payload", "field", "message"), [
    ({"customer": "c", "items": [{"sku": "a", "count": 0}]}, "payload.items[0].count",
     "Input should be greater than or equal to 1"),
    ({"items": []}, "payload.customer", "Field required"),
    ([1, 2], "payload", "Input should be a valid dictionary or instance of Order"),
    (None, "payload", "Input should be a valid dictionary or instance of Order"),
    ({"customer": 5, "items": "x"}, "payload.customer",
     "Input should be a valid string; payload.items: Input should be a valid list"),
])
def test_a_payload_that_does_not_fit_names_its_field(payload: Any, field: str,
                                                     message: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_input(Order, payload)
    assert refused.value.field == field
    assert str(refused.value) == f"{field}: {message}"
    assert isinstance(refused.value, ValidationError)  # the API answers 422


def test_many_errors_are_named_up_to_a_few_and_counted() -> None:
    items = [{"sku": 1, "count": 0} for _ in range(4)]
    with pytest.raises(InvalidInput) as refused:
        check_input(Order, {"customer": "c", "items": items})
    message = str(refused.value)
    assert message.count("payload.items[") == 5
    assert message.endswith("and 3 more")


def test_untyped_takes_anything_and_typed_builds_the_model() -> None:
    check_input(None, object())
    assert task_input(None, {"a": 1}) == {"a": 1}
    assert task_input(Item, {"sku": "a", "count": 2}) == Item(sku="a", count=2)
    with pytest.raises(InvalidPayload, match=r"^payload\.count: ") as refused:
        task_input(Item, {"sku": "a", "count": 0})
    assert isinstance(refused.value, NonRetryableError)  # at run time: never retried


def test_a_result_is_checked_and_stored_as_the_models_json() -> None:
    assert task_output(Receipt, Receipt(total=3)) == {"total": 3}
    assert task_output(Receipt, {"total": 3}) == {"total": 3}
    assert task_output(None, {"any": "thing"}) == {"any": "thing"}
    with pytest.raises(InvalidResult, match=r"^result\.total: Field required$") as refused:
        task_output(Receipt, {"sum": 3})
    assert isinstance(refused.value, NonRetryableError)


def test_the_registry_refuses_an_input_that_is_not_a_model() -> None:
    registry = TaskRegistry()
    for bad in (dict, Order(customer="c", items=[]), "Order"):
        with pytest.raises(ValidationError, match=r"^input: must be a pydantic model"):
            registry.task("t", input=bad)
    with pytest.raises(ValidationError, match=r"^output: must be a pydantic model"):
        registry.task("t", output=int)
    assert registry.names() == []


def test_resolve_checks_the_json_the_worker_will_read() -> None:
    registry = TaskRegistry()
    registry.task("order", input=Order)(lambda payload, ctx: None)
    ok = resolve(JobSpec(task="order", payload={"customer": "c", "items": []}), registry,
                 pools=("default",), now_ms=0)
    assert ok.payload_json == '{"customer":"c","items":[]}'
    with pytest.raises(InvalidInput, match=r"^payload\.customer: Field required$"):
        resolve(JobSpec(task="order", payload={"items": ()}), registry, pools=("default",),
                now_ms=0)
    # A template whose payload comes later (a trigger's event) is checked per job.
    resolve(JobSpec(task="order"), registry, pools=("default",), now_ms=0,
            payload_known=False)


def test_the_published_schemas() -> None:
    assert json_schema(None, "validation") is None
    given = json_schema(Order, "validation")
    assert given is not None and given["required"] == ["customer", "items"]
    assert given["$defs"]["Item"]["properties"]["count"]["minimum"] == 1


def test_run_task_does_as_the_worker() -> None:
    registry = TaskRegistry()
    seen: list[Any] = []

    @registry.task("total", input=Order, output=Receipt, max_attempts=3)
    def total(order: Order, ctx: JobContext) -> Any:
        seen.append(order)
        if order.customer == "liar":
            return {"total": "many"}
        return Receipt(total=sum(i.count for i in order.items))

    payload = {"customer": "c", "items": [{"sku": "a", "count": 2}]}
    assert run_task("total", payload, registry=registry) == {"total": 2}
    assert seen == [Order.model_validate(payload)]
    with pytest.raises(InvalidInput, match=r"^payload\.items: Field required$"):
        run_task("total", {"customer": "c"}, registry=registry)
    with pytest.raises(InvalidResult, match=r"^result\.total: "):
        run_task("total", {"customer": "liar", "items": []}, registry=registry)
    assert len(seen) == 2  # the liar ran once: an unfit result is never retried
