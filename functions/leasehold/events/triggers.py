"""Event triggers: an EventBridge-style event pattern mapped to a job template.

On AWS, EventBridge delivers events to the trigger handler (``handlers/trigger.py``); in the
local runtime ``POST /events`` plays PutEvents. Either way :func:`dispatch` matches the event
against the stored triggers and submits one job per match, with an id derived from
(trigger, event id): EventBridge delivers at least once, and a redelivery creates nothing.

Pattern syntax (a subset of EventBridge's): nested objects; arrays of alternatives; exact
strings, numbers, booleans and null; ``prefix``, ``suffix`` (each also with
``equals-ignore-case``), ``equals-ignore-case``, ``wildcard``, ``anything-but`` (a value, a
list, or a ``prefix``/``suffix``/``equals-ignore-case``/``wildcard``), ``numeric`` ranges,
``exists``, and ``$or``. An array in the event matches if any element does.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from leasehold.aws.dynamo import from_av, query, to_av
from leasehold.clock import iso
from leasehold.core.ids import derived_job_id, new_id
from leasehold.core.jobs import Job
from leasehold.core.spec import (
    MAX_PAYLOAD_BYTES,
    JobSpec,
    check_tenant,
    check_text,
    encode_json,
    targeted,
)
from leasehold.errors import NotFound, ValidationError
from leasehold.lifecycle import handoff
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import Submitted, new_job, through_intakes
from leasehold.time.templates import JobTemplate

log = logging.getLogger(__name__)

_OPERATORS = {"prefix", "suffix", "equals-ignore-case", "wildcard", "anything-but", "numeric",
              "exists"}
_NUMERIC_OPS = {"<", "<=", "=", ">", ">="}
_MISSING = object()


# -- patterns (pure) -------------------------------------------------------------------------

def validate_pattern(pattern: Any, path: str = "pattern") -> None:
    """Refuse what EventBridge would refuse, naming the field ``pattern``."""
    if not isinstance(pattern, dict) or not pattern:
        raise ValidationError("pattern", f"{path} must be a non-empty object")
    for key, value in pattern.items():
        where = f"{path}.{key}"
        if key == "$or":
            if not isinstance(value, list) or len(value) < 2:
                raise ValidationError("pattern", f"{where} must list at least two patterns")
            for i, alternative in enumerate(value):
                validate_pattern(alternative, f"{where}[{i}]")
        elif isinstance(value, dict):
            validate_pattern(value, where)
        elif isinstance(value, list) and value:
            for matcher in value:
                _validate_matcher(matcher, where)
        else:
            raise ValidationError("pattern", f"{where} must be a non-empty array or an object")


def _validate_matcher(matcher: Any, where: str) -> None:
    if matcher is None or isinstance(matcher, str | int | float | bool):
        return
    if not isinstance(matcher, dict) or len(matcher) != 1:
        raise ValidationError("pattern", f"{where}: a matcher is a value or a one-key object")
    (op, arg), = matcher.items()
    if op not in _OPERATORS:
        raise ValidationError("pattern", f"{where}: unknown operator {op!r}")
    if op == "numeric":
        if not isinstance(arg, list) or len(arg) not in (2, 4) or any(
                arg[i] not in _NUMERIC_OPS or isinstance(arg[i + 1], bool)
                or not isinstance(arg[i + 1], int | float) for i in range(0, len(arg), 2)):
            raise ValidationError("pattern", f"{where}: numeric takes [op, n] or [op, n, op, n]")
    elif op == "exists":
        if not isinstance(arg, bool):
            raise ValidationError("pattern", f"{where}: exists takes true or false")
    elif op == "anything-but":
        if isinstance(arg, dict):
            _validate_matcher(arg, where)
        elif isinstance(arg, list) and not arg:
            raise ValidationError("pattern", f"{where}: anything-but needs values")
    elif op in ("prefix", "suffix") and isinstance(arg, dict):
        if set(arg) != {"equals-ignore-case"} or not isinstance(arg["equals-ignore-case"], str):
            raise ValidationError("pattern", f"{where}: {op} takes a string")
    elif not isinstance(arg, str):
        raise ValidationError("pattern", f"{where}: {op} takes a string")


def matches(pattern: Mapping[str, Any], event: Any) -> bool:
    """Whether ``event`` matches ``pattern`` (EventBridge semantics, for our subset)."""
    if not isinstance(event, Mapping):
        return False
    for key, expected in pattern.items():
        if key == "$or":
            if not any(matches(alternative, event) for alternative in expected):
                return False
            continue
        value = event.get(key, _MISSING)
        if isinstance(expected, Mapping):
            if not matches(expected, value if value is not _MISSING else {}):
                return False
        elif not _field_matches(expected, value):
            return False
    return True


def _field_matches(matchers: list[Any], value: Any) -> bool:
    values = value if isinstance(value, list) else [value]
    for matcher in matchers:
        if isinstance(matcher, dict) and "exists" in matcher:
            if (value is not _MISSING) == matcher["exists"]:
                return True
            continue
        if any(v is not _MISSING and _one(matcher, v) for v in values):
            return True
    return False


def _one(matcher: Any, value: Any) -> bool:
    if not isinstance(matcher, dict):
        return bool(matcher == value and type(matcher) is type(value)) or (
            isinstance(matcher, int | float) and not isinstance(matcher, bool)
            and isinstance(value, int | float) and not isinstance(value, bool)
            and matcher == value)
    (op, arg), = matcher.items()
    if op == "numeric":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        checks = {"<": value.__lt__, "<=": value.__le__, "=": value.__eq__, ">": value.__gt__,
                  ">=": value.__ge__}
        return all(checks[arg[i]](arg[i + 1]) for i in range(0, len(arg), 2))
    if op == "anything-but":
        if isinstance(arg, dict):
            return isinstance(value, str) and not _one(arg, value)
        excluded = arg if isinstance(arg, list) else [arg]
        return not any(_one(x, value) for x in excluded)
    if not isinstance(value, str):
        return False
    if op == "equals-ignore-case":
        return value.lower() == str(arg).lower()
    if op == "wildcard":
        return fnmatch.fnmatchcase(value, str(arg).replace("[", "[[]").replace("?", "[?]"))
    folded = isinstance(arg, dict)
    text = arg["equals-ignore-case"] if folded else arg
    subject, text = (value.lower(), text.lower()) if folded else (value, text)
    return subject.startswith(text) if op == "prefix" else subject.endswith(text)


def extract(event: Mapping[str, Any], path: str) -> Any:
    """The part of ``event`` at ``path`` ("$", "$.detail", "$.detail.order"), or None."""
    if path in ("", "$"):
        return event
    node: Any = event
    for part in path.removeprefix("$.").split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


# -- stored triggers -------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Trigger:
    trigger_id: str
    tenant: str
    name: str
    pattern: Mapping[str, Any]
    template: JobTemplate
    #: Where the job's payload comes from: the template's payload if it has one, else this
    #: part of the event (EventBridge's Input vs InputPath).
    input_path: str = "$"
    created_at: int = 0
    #: A job with no code (``{"http": {...}}``), as given: its template's payload is the
    #: checked target; an HTTP target with no ``body`` sends the event as its body.
    target: Mapping[str, Any] | None = None

    def view(self) -> dict[str, Any]:
        return {"trigger_id": self.trigger_id, "tenant": self.tenant, "name": self.name,
                "pattern": self.pattern, "task": self.template.task,
                "payload": self.template.payload, "input_path": self.input_path,
                "pool": self.template.pool, "priority": self.template.priority,
                "target": self.target,
                **dict(self.template.options), "created_at": iso(self.created_at)}


def _key(trigger_id: str) -> dict[str, Any]:
    return {"pk": {"S": "trigger"}, "sk": {"S": trigger_id}}


def create(app: Leasehold, body: Mapping[str, Any], *, tenant: str) -> Trigger:
    now = app.now()
    unknown = set(body) - {"name", "pattern", "task", "payload", "input_path", "pool",
                           "priority", "max_attempts", "timeout_seconds", "labels",
                           "concurrency", "throttle", "unique", "debounce",
                           "start_within_seconds", "target"}
    if unknown:
        raise ValidationError(sorted(unknown)[0], "is not a trigger field")
    pattern = body.get("pattern")
    validate_pattern(pattern)
    input_path = check_text("input_path", body.get("input_path") or "$", limit=256)
    if not input_path.startswith("$"):
        raise ValidationError("input_path", "must start with '$' (e.g. '$.detail')")
    template = JobTemplate.resolve(
        app.registry, pools=app.settings.pools, now=now, task=body.get("task"),
        payload=body.get("payload"), tenant=check_tenant(tenant), pool=body.get("pool"),
        priority=body.get("priority"), max_attempts=body.get("max_attempts"),
        timeout_seconds=body.get("timeout_seconds"), labels=body.get("labels"),
        timeout_limits=app.settings.job_timeout_limits(), concurrency=body.get("concurrency"),
        throttle=body.get("throttle"), unique=body.get("unique"),
        debounce=body.get("debounce"), start_within_seconds=body.get("start_within_seconds"),
        target=body.get("target"),  # a target: checked as POST /jobs checks it
        # Without a fixed payload each job takes its event's: a typed task's input cannot
        # be checked until an event comes (a job whose event does not fit ends DEAD at its
        # first lease, InvalidPayload naming the field, the event kept as its payload).
        payload_known=body.get("payload") is not None)
    target = body.get("target")
    trigger = Trigger(trigger_id=new_id(now), tenant=tenant,
                      name=check_text("name", body.get("name") or "", limit=128, empty_ok=True),
                      pattern=pattern, template=template,  # type: ignore[arg-type]
                      input_path=input_path, created_at=now, target=target)
    app.clients.dynamodb.put_item(TableName=app.settings.coordination_table, Item={
        **_key(trigger.trigger_id), **to_av({
            "tenant": tenant, "name": trigger.name, "pattern": json.dumps(pattern),
            "template": template.to_item(), "input_path": input_path, "created_at": now,
            **({"target": json.dumps(target)} if target is not None else {})})})
    return trigger


def _from_item(item: Mapping[str, Any]) -> Trigger:
    return Trigger(trigger_id=item["sk"], tenant=item["tenant"], name=item.get("name", ""),
                   pattern=json.loads(item["pattern"]),
                   template=JobTemplate.from_item(item["template"]),
                   input_path=item.get("input_path", "$"),
                   created_at=int(item.get("created_at", 0)),
                   target=json.loads(item["target"]) if "target" in item else None)


def list_triggers(app: Leasehold, tenant: str | None = None) -> list[Trigger]:
    found = [_from_item(item) for item in query(
        app.clients.dynamodb, TableName=app.settings.coordination_table,
        KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "trigger"}})]
    return [t for t in found if tenant is None or t.tenant == tenant]


def get(app: Leasehold, trigger_id: str, tenant: str | None = None) -> Trigger:
    item = app.clients.dynamodb.get_item(TableName=app.settings.coordination_table,
                                         Key=_key(trigger_id), ConsistentRead=True).get("Item")
    trigger = _from_item(from_av(item)) if item else None
    if trigger is None or (tenant is not None and trigger.tenant != tenant):
        raise NotFound(f"no trigger {trigger_id}", trigger_id=trigger_id)
    return trigger


def delete(app: Leasehold, trigger_id: str, tenant: str | None = None) -> None:
    get(app, trigger_id, tenant)
    app.clients.dynamodb.delete_item(TableName=app.settings.coordination_table,
                                     Key=_key(trigger_id))


def dispatch(app: Leasehold, event: Mapping[str, Any], *, tenant: str | None = None
             ) -> list[Job]:
    """Submit one job per trigger whose pattern matches ``event`` (of ``tenant`` if given)."""
    event = dict(event)
    event.setdefault("id", str(uuid.uuid4()))
    now = app.now()
    event.setdefault("time", iso(now))
    jobs = []
    admitted: dict[str, bool] = {}
    for trigger in list_triggers(app, tenant):
        if not matches(trigger.pattern, event):
            continue
        if trigger.tenant not in admitted:
            admitted[trigger.tenant] = app.homed_here(trigger.tenant, now)
        if not admitted[trigger.tenant]:
            # Cells: a trigger fires only in its tenant's home; the home's own copy of the
            # event (each cell's bus gets it) fires the tenant's triggers there.
            log.info("trigger %s left event %s to its tenant's home cell",
                     trigger.trigger_id, event["id"])
            continue
        payload_json = None
        try:
            if trigger.target is not None:
                payload_json = _target_payload(app, trigger, extract(event, trigger.input_path))
            elif trigger.template.payload_json == "null":
                payload_json = encode_json("payload", extract(event, trigger.input_path),
                                           MAX_PAYLOAD_BYTES)
        except ValidationError as exc:  # e.g. an event too large for a request body
            log.error("trigger %s made no job for event %s: %s", trigger.trigger_id,
                      event["id"], exc)
            continue
        job_id = derived_job_id(trigger.tenant, "trigger", trigger.trigger_id, str(event["id"]))
        try:
            job = new_job(app, trigger.template.to_resolved(now, payload_json=payload_json),
                          now, job_id=job_id, actor="trigger",
                          extra={"trigger_id": trigger.trigger_id})
            made = through_intakes(app, trigger.template.intake_spec(payload_json),
                                   partial(_create, app, now))(job, ())
        except ValidationError as exc:
            # A key template (unique, debounce, concurrency, throttle) naming a field this
            # event's payload lacks: this trigger makes no job for it; the others still do
            # (logged, and counted by the caller's log).
            log.error("trigger %s made no job for event %s: %s", trigger.trigger_id,
                      event["id"], exc)
            continue
        jobs.append(made.job)
    return jobs


def _target_payload(app: Leasehold, trigger: Trigger, part: Any) -> str | None:
    """An HTTP target that sets no ``body`` (and whose method takes one) sends ``part`` of the
    event as its body, checked again as a submission's target is; any other target (an AWS
    target's parameters) runs as given: None keeps the template's payload."""
    assert trigger.target is not None
    [(kind, value)] = trigger.target.items()
    if kind != "http" or value.get("body") is not None or \
            str(value.get("method", "GET")).upper() in ("GET", "HEAD"):
        return None
    spec = targeted(JobSpec(task="", tenant=trigger.tenant,
                            target={kind: {**value, "body": part}}), app.registry)
    return encode_json("payload", spec.payload, MAX_PAYLOAD_BYTES)


def _create(app: Leasehold, now: int, row: Job, writes: Sequence[Mapping[str, Any]]
            ) -> Submitted:
    stored, created = app.store.create(row, also=writes)
    if created:  # also when our put's response was lost (the store recognised its row)
        handoff.send(app.queues, stored, now)
    return Submitted(stored, created=created)
