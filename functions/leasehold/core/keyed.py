"""``unique`` and ``debounce`` as a job asks for them: the checks POST /jobs runs, pure.

The submission intakes (``leasehold.flow.unique``, ``leasehold.flow.debounce``) run them on
each job; a schedule or trigger template runs the same ones when it is written, so an option
the job route refuses (422) is refused there too, not at every fire. A key template is
rendered here over the payload (a field it names must be there; the rendered key is 1 to
:data:`~leasehold.core.flowcontrol.MAX_KEY_CHARS` characters).
"""

from __future__ import annotations

from typing import Any

from leasehold.core.flowcontrol import MAX_KEY_TEMPLATE_CHARS, fields, render_key, unrendered
from leasehold.core.spec import check_number, check_text
from leasehold.errors import ValidationError

#: The longest key *template* (a rendered key is at most MAX_KEY_CHARS).
MAX_KEY_TEMPLATE = MAX_KEY_TEMPLATE_CHARS
#: A debounce window's fire time is its SQS delay: at most SQS's 15 minutes.
MAX_DEBOUNCE_SECONDS = 900
MAX_WAIT_LIMIT = 24 * 3600


def render(fieldname: str, template: object, payload: Any) -> str:
    """The key ``template`` names for ``payload``: each ``{payload.a.b}`` replaced by that
    field's value (a string or number). A field the payload lacks is an error."""
    return render_key(fieldname, check_text(fieldname, template, limit=MAX_KEY_TEMPLATE),
                      payload)


def unique_key(value: Any, payload: Any) -> str | None:
    """The rendered key of a ``unique`` option (None: no option)."""
    if value is None:
        return None
    fields("unique", value, {"key"}, {"key"})
    return render("unique.key", value["key"], payload)


def debounce(value: Any, payload: Any, *, unique: Any = None, idempotency_key: Any = None,
             run_at: Any = None, delay_seconds: Any = None
             ) -> tuple[str, float, float] | None:
    """(key, seconds, max_wait_seconds) of a ``debounce`` option, or None; it takes no
    ``unique``, ``idempotency_key``, ``run_at`` nor ``delay_seconds`` beside it."""
    if value is None:
        return None
    fields("debounce", value, {"key", "seconds", "max_wait_seconds"}, {"key", "seconds"})
    wait = float(check_number("debounce.seconds", value["seconds"], low=0.001,
                              high=MAX_DEBOUNCE_SECONDS))
    longest = value.get("max_wait_seconds")
    longest = MAX_WAIT_LIMIT if longest is None else float(check_number(
        "debounce.max_wait_seconds", longest, low=wait, high=MAX_WAIT_LIMIT))
    for name, given in (("idempotency_key", idempotency_key), ("run_at", run_at),
                        ("delay_seconds", delay_seconds), ("unique", unique)):
        if given is not None:
            raise ValidationError("debounce", f"cannot be combined with {name}: a debounced "
                                              "job's time and identity are its window's")
    return render("debounce.key", value["key"], payload), wait, longest


def check(unique: Any, debounce_value: Any, payload: Any, *, payload_known: bool = True
          ) -> None:
    """The checks POST /jobs runs on a job's ``unique`` and ``debounce`` (give its own
    options, else its task's), for a template that will submit such jobs (a schedule, a
    trigger), so what the job route refuses is refused when the template is written.
    ``payload_known``: False when each job brings its own payload (a trigger that takes its
    event's): a key is then checked as a template and rendered per job."""
    if payload_known:
        unique_key(unique, payload)
        debounce(debounce_value, payload, unique=unique)
        return
    unique_key(unrendered("unique", unique), None)
    debounce(unrendered("debounce", debounce_value), None, unique=unique)

