"""Flow-control keys: a string, or a template over the payload (``"stripe:{payload.id}"``).

A key is scoped to its tenant by the item it names (``{tenant}#{kind}#{key}``: a tenant
never holds ``#``), so two tenants' equal keys never meet. Every error here is a
:class:`~leasehold.errors.ValidationError` raised before anything is written (a 422).
"""

from __future__ import annotations

from typing import Any

from leasehold.core import keyed
from leasehold.core.flowcontrol import fields
from leasehold.core.spec import check_number

__all__ = ["MAX_KEY", "fields", "item_key", "option", "render", "seconds"]

MAX_KEY = keyed.MAX_KEY_TEMPLATE


def render(fieldname: str, template: object, payload: Any) -> str:
    """The key ``template`` names for ``payload``: each ``{payload.a.b}`` replaced by that
    field's value (a string or number), as concurrency and throttle keys are rendered
    (:func:`leasehold.core.flowcontrol.render_key`). A field the payload lacks is an error."""
    return keyed.render(fieldname, template, payload)


def option(spec_value: Any, task_value: Any) -> Any:
    """The job's own value, else its task's default (None: the option is off)."""
    return spec_value if spec_value is not None else task_value


def seconds(fieldname: str, value: object, *, low: float, high: float) -> float:
    return float(check_number(fieldname, value, low=low, high=high))


def item_key(tenant: str, kind: str, key: str) -> str:
    """The tenants-table item of a tenant's ``kind`` key (``unique``, ``debounce``)."""
    return f"{tenant}#{kind}#{key}"
