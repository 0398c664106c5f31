"""Typed tasks: ``@task("charge", input=ChargeIn, output=ChargeOut)`` with pydantic models.

One rule per place:

* at submission, :func:`check_input` (called by ``core.spec.resolve``, which every way a job
  is made goes through) refuses a payload that does not fit, with :class:`InvalidInput`
  naming the field (``payload.amount: ...``), before anything is written;
* at each attempt, :func:`task_input` builds the model instance the handler receives, from
  the stored payload, against the model deployed *now*: a payload that no longer fits (a
  deploy changed the model) fails the attempt with :class:`InvalidPayload`, never retried;
* at the finish, :func:`task_output` checks the result and stores the model's JSON form: a
  result that does not fit fails the job with :class:`InvalidResult`, never retried.

pydantic is imported only when a typed task is used: untyped tasks and the client never pay
for it (``tests/unit/test_cold_start.py``).
"""

from __future__ import annotations

from typing import Any, Literal

from leasehold.errors import InvalidInput, InvalidPayload, InvalidResult, ValidationError

#: How many of pydantic's errors a message names after the first (the rest are counted).
MORE_ERRORS = 4


def check_model(option: str, model: object) -> None:
    """Refuse an ``input=``/``output=`` that is not a pydantic model class."""
    if model is None:
        return
    if not (isinstance(model, type) and hasattr(model, "model_validate")
            and hasattr(model, "model_json_schema")):
        raise ValidationError(option, f"must be a pydantic model class (a subclass of "
                                      f"pydantic.BaseModel), not {model!r}")


def check_input(model: type | None, payload: Any) -> None:
    """At submission: :class:`InvalidInput` naming the first field that does not fit
    ``model`` (a task's ``input=``; None takes any JSON)."""
    if model is not None:
        _validate(model, payload, "payload", InvalidInput)


def task_input(model: type | None, payload: Any) -> Any:
    """What the handler receives: an instance of ``model`` (a task's ``input=``) built from
    the stored payload, or the payload itself for an untyped task."""
    if model is None:
        return payload
    return _validate(model, payload, "payload", InvalidPayload)


def task_output(model: type | None, result: Any) -> Any:
    """The result as stored: checked against ``model`` (a task's ``output=``; the handler
    may return an instance or its JSON form) and dumped to JSON; untyped: as it is."""
    if model is None:
        return result
    return _validate(model, result, "result", InvalidResult).model_dump(mode="json")


def json_schema(model: type | None, mode: Literal["validation", "serialization"]
                ) -> dict[str, Any] | None:
    """``model``'s JSON Schema: of what it accepts (an input), or of what it stores (an
    output, ``serialization``); None for an untyped task."""
    if model is None:
        return None
    schema: dict[str, Any] = model.model_json_schema(mode=mode)  # type: ignore[attr-defined]
    return schema


def _validate(model: Any, value: Any, root: str, error: type[Exception]) -> Any:
    from pydantic import ValidationError as Invalid  # only typed tasks pay for pydantic

    try:
        return model.model_validate(value)
    except Invalid as exc:
        found = [(_path(root, e.get("loc", ())), str(e.get("msg", "is invalid")))
                 for e in exc.errors(include_url=False)]
        field, message = found[0] if found else (root, str(exc))
        others = [f"{where}: {what}" for where, what in found[1:1 + MORE_ERRORS]]
        if len(found) > 1 + MORE_ERRORS:
            others.append(f"and {len(found) - 1 - MORE_ERRORS} more")
        if others:
            message += "; " + "; ".join(others)
        if issubclass(error, ValidationError):
            raise error(field, message) from None
        raise error(f"{field}: {message}") from None


def _path(root: str, loc: Any) -> str:
    """pydantic's location in the API's field syntax: ``payload.items[0].sku``."""
    path = root
    for part in loc or ():
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path
