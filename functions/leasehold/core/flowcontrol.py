"""Keyed flow control as a job asks for it: ``concurrency`` and ``throttle``, validated at submit.

Pure (no AWS): the options' values, their key templates over the payload, and the *gate* a job
carries on its row and in its hand-off message, which the lease reads (``leasehold.flow``
enforces it). A key is scoped to its tenant here, once: ``{tenant}#flow#{key}`` (a tenant
never holds ``#``, so no tenant's keys can name another's).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from leasehold.clock import iso
from leasehold.errors import ValidationError

#: The row attribute (and message field) holding a job's resolved gate; absent: no option.
GATE = "lease_gate"
#: The other row attributes flow control writes (its modules use these names, and the job
#: view shows them): the rendered unique key, the debounce key and its wait per submission,
#: and the latest time (epoch ms) a job may be leased for the first time (the lease refuses it
#: past that, and the first lease removes it: a started job never expires).
UNIQUE_KEY = "unique_key"
DEBOUNCE_KEY = "debounce_key"
DEBOUNCE_WAIT_MS = "debounce_wait_ms"
START_BY = "start_by"
MAX_KEY_CHARS = 200
#: The longest key template (before its ``{payload.…}`` fields are filled in).
MAX_KEY_TEMPLATE_CHARS = 256
MAX_LIMIT = 10_000
MAX_PERIOD_SECONDS = 86_400
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: ``{payload.account_id}`` or ``{payload.customer.id}``: a field path into the payload.
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")


@dataclass(frozen=True)
class Concurrency:
    """At most ``limit`` jobs with ``key`` RUNNING at once."""

    key: str
    limit: int


@dataclass(frozen=True)
class Throttle:
    """At most ``limit`` starts per ``period_seconds`` per key, ``burst`` at once."""

    key: str
    limit: int
    period_seconds: float
    burst: int


def render_key(fieldname: str, template: str, payload: Any) -> str:
    """The key a template names for this payload: ``"stripe:{payload.account_id}"``.

    A placeholder that names a missing field (or not a scalar) is a validation error (422).
    """
    def value(match: re.Match[str]) -> str:
        path = match.group(1).split(".")
        if path[0] != "payload" or len(path) < 2:
            raise ValidationError(fieldname, f"a key template names payload fields, as "
                                             f"{{payload.account_id}}; got {{{match.group(1)}}}")
        found: Any = payload
        for part in path[1:]:
            if not isinstance(found, Mapping) or part not in found:
                raise ValidationError(fieldname, f"the payload has no field "
                                                 f"{'.'.join(path[1:])!r} for the key template "
                                                 f"{template!r}")
            found = found[part]
        if isinstance(found, bool) or not isinstance(found, str | int | float):
            raise ValidationError(fieldname, f"{{{match.group(1)}}} must be a string or a "
                                             "number")
        return str(found)

    key = _PLACEHOLDER.sub(value, template)
    if not key or len(key) > MAX_KEY_CHARS or _CONTROL.search(key):
        raise ValidationError(fieldname, f"a key is 1 to {MAX_KEY_CHARS} characters without "
                                         "control characters")
    return key


def fields(fieldname: str, value: Any, allowed: set[str], required: set[str]
           ) -> Mapping[str, Any]:
    """``value`` as a flow-control option's object: only ``allowed`` fields, every
    ``required`` one given, and a string ``key``; a clear 422 otherwise."""
    if isinstance(value, Concurrency | Throttle):
        value = vars(value)
    if not isinstance(value, Mapping):
        raise ValidationError(fieldname, "must be an object")
    unknown = set(value) - allowed
    if unknown:
        raise ValidationError(fieldname, f"unknown field(s) {sorted(unknown)}; it takes "
                                         f"{', '.join(sorted(allowed))}")
    missing = required - {k for k, v in value.items() if v is not None}
    if missing:
        raise ValidationError(fieldname, f"needs {', '.join(sorted(missing))}")
    if not isinstance(value["key"], str):
        raise ValidationError(f"{fieldname}.key", "must be a string")
    return value


def _count(fieldname: str, value: Any, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ValidationError(fieldname, f"must be a whole number from 1 to {high}")
    return value


def concurrency(value: Any, payload: Any) -> Concurrency:
    data = fields("concurrency", value, {"key", "limit"}, {"key", "limit"})
    return Concurrency(render_key("concurrency.key", data["key"], payload),
                       _count("concurrency.limit", data["limit"], MAX_LIMIT))


def throttle(value: Any, payload: Any) -> Throttle:
    data = fields("throttle", value, {"key", "limit", "period_seconds", "burst"},
                   {"key", "limit", "period_seconds"})
    limit = _count("throttle.limit", data["limit"], MAX_LIMIT)
    period = data["period_seconds"]
    if isinstance(period, bool) or not isinstance(period, int | float) or \
            not 0.001 <= period <= MAX_PERIOD_SECONDS:
        raise ValidationError("throttle.period_seconds",
                              f"must be a number from 0.001 to {MAX_PERIOD_SECONDS}")
    burst = data.get("burst")
    return Throttle(render_key("throttle.key", data["key"], payload), limit, float(period),
                    limit if burst is None else _count("throttle.burst", burst, MAX_LIMIT))


#: ``{payload.a.b}`` in a key template.
_FIELD = re.compile(r"\{payload(\.[^{}.]+)+\}")


def unrendered(fieldname: str, value: Any) -> Any:
    """``value`` (an option with a ``key``) with each ``{payload.…}`` of its key standing for
    one character: checking the result against no payload refuses only what no payload could
    fix, for a template whose jobs each bring their own payload (a trigger's events)."""
    if isinstance(value, Concurrency | Throttle):
        value = vars(value)
    if not isinstance(value, Mapping) or not isinstance(value.get("key"), str):
        return value
    if len(value["key"]) > MAX_KEY_TEMPLATE_CHARS:
        raise ValidationError(f"{fieldname}.key", f"a key template is at most "
                                                  f"{MAX_KEY_TEMPLATE_CHARS} characters")
    return {**value, "key": _FIELD.sub("x", value["key"])}


def plain(value: Any) -> Any:
    """An option as a plain mapping (a task's default may be a :class:`Concurrency`)."""
    return dict(vars(value)) if isinstance(value, Concurrency | Throttle) else value


def slot_id(tenant: str, key: str) -> str:
    """The tenants-table item of a tenant's concurrency key."""
    return f"{tenant}#flow#{key}"


def rate_id(tenant: str, key: str) -> str:
    """The tenants-table item of a tenant's throttle key."""
    return f"{tenant}#rate#{key}"


def gate(tenant: str, payload: Any, *, job: Mapping[str, Any], task: Mapping[str, Any]
         ) -> dict[str, Any] | None:
    """The gate of a job: its own options over its task's defaults, keys rendered and scoped.

    ``job`` and ``task``: ``{"concurrency": ..., "throttle": ...}`` as given (None: not set).
    None when the job uses no option (it then pays nothing for flow control).
    """
    out: dict[str, Any] = {}
    chosen = job.get("concurrency") if job.get("concurrency") is not None \
        else task.get("concurrency")
    if chosen is not None:
        c = concurrency(chosen, payload)
        out["concurrency"] = {"key": c.key, "slot": slot_id(tenant, c.key), "limit": c.limit}
    chosen = job.get("throttle") if job.get("throttle") is not None else task.get("throttle")
    if chosen is not None:
        t = throttle(chosen, payload)
        out["throttle"] = {"key": t.key, "item": rate_id(tenant, t.key), "limit": t.limit,
                           "period_ms": int(t.period_seconds * 1000), "burst": t.burst}
    return out or None


def shown(extra: Mapping[str, Any]) -> dict[str, Any] | None:
    """The flow control a job runs under, as its view shows it (keys as the tenant's own,
    never the scoped items); None when it uses none."""
    out: dict[str, Any] = {}
    gate = extra.get(GATE) or {}
    if (c := gate.get("concurrency")) is not None:
        out["concurrency"] = {"key": str(c["key"]), "limit": int(c["limit"])}
    if (t := gate.get("throttle")) is not None:
        out["throttle"] = {"key": str(t["key"]), "limit": int(t["limit"]),
                           "period_seconds": int(t["period_ms"]) / 1000,
                           "burst": int(t["burst"])}
    if extra.get(UNIQUE_KEY) is not None:
        out["unique"] = {"key": str(extra[UNIQUE_KEY])}
    if extra.get(DEBOUNCE_KEY) is not None:
        out["debounce"] = {"key": str(extra[DEBOUNCE_KEY]),
                           "seconds": int(extra.get(DEBOUNCE_WAIT_MS, 0)) / 1000}
    if extra.get(START_BY) is not None:
        out["start_by"] = iso(int(extra[START_BY]))
    return out or None
