"""The job search filters, as ``GET /jobs`` takes them in its query and ``POST /jobs/bulk``
in its body: one parser, so both mean the same thing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated

from pydantic import Field

from leasehold.api.models import IsoTime, StateName, _Strict
from leasehold.clock import to_ms
from leasehold.core.spec import CONTROL_CHARS
from leasehold.core.states import JobState
from leasehold.errors import ValidationError
from leasehold.tenancy.listing import JobFilter

#: ``name:value``: a name without ``:``, and no control characters (as labels have none).
LABEL_PATTERN = f"^[^:{CONTROL_CHARS}]+:[^{CONTROL_CHARS}]*$"
LabelFilter = Annotated[str, Field(pattern=LABEL_PATTERN)]
LABEL_HELP = "a label the job carries, as name:value (repeat for several: all must match), " \
             "e.g. env:prod"
#: Which filters the index serves and which are a bounded scan (docs/operations.md).
COST_NOTE = (
    "created_after/created_before use the index (its sort key: only that range is read); "
    "label, error_type, error_prefix, id_prefix, state, task, pool, code_version and patch "
    "are tested on the rows read, a bounded scan of your listing (at most 8 index pages a "
    "call, then a short page and a cursor)")


def labels_of(values: Sequence[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values or ():
        name, sep, text = value.partition(":")
        if not sep or not name:
            raise ValidationError("label", f"{value!r} is not name:value (e.g. env:prod)")
        out[name] = text
    return out


def job_filter(*, states: Sequence[str] | None = None, task: str | None = None,
               pool: str | None = None, label: Sequence[str] | None = None,
               error_type: str | None = None, error_prefix: str | None = None,
               id_prefix: str | None = None, created_after: datetime | None = None,
               created_before: datetime | None = None,
               code_version: str | None = None) -> JobFilter:
    low = None if created_after is None else to_ms(created_after)
    high = None if created_before is None else to_ms(created_before)
    if low is not None and high is not None and low >= high:
        raise ValidationError("created_after", "must be before created_before")
    return JobFilter(states={JobState(s) for s in states or ()}, task=task, pool=pool,
                     labels=labels_of(label), error_type=error_type,
                     error_prefix=error_prefix, id_prefix=id_prefix, created_after=low,
                     created_before=high, code_version=code_version)


class SearchIn(_Strict):
    """The filters of ``GET /jobs`` as a JSON object (``POST /jobs/bulk``'s ``filter``)."""

    state: list[StateName] = Field(default_factory=list, max_length=7)
    task: str | None = Field(default=None, min_length=1, max_length=128)
    pool: str | None = Field(default=None, min_length=1, max_length=32)
    label: list[LabelFilter] = Field(
        default_factory=list, max_length=32, description=LABEL_HELP)
    error_type: str | None = Field(default=None, min_length=1, max_length=128)
    error_prefix: str | None = Field(default=None, min_length=1, max_length=256)
    id_prefix: str | None = Field(default=None, min_length=1, max_length=64)
    created_after: IsoTime | None = None
    created_before: IsoTime | None = None
    code_version: str | None = Field(default=None, min_length=1, max_length=64)

    def to_filter(self) -> JobFilter:
        return job_filter(states=self.state, task=self.task, pool=self.pool, label=self.label,
                          error_type=self.error_type, error_prefix=self.error_prefix,
                          id_prefix=self.id_prefix, created_after=self.created_after,
                          created_before=self.created_before,
                          code_version=self.code_version)
