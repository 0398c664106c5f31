"""What a step receives from its dependencies: their outcome and result, size-limited.

Each dependency's entry is written onto the dependent's row when the dependency finishes
(in the same conditional update that counts it), so the worker finds it in ``ctx.extra``
without another read. A row must stay below DynamoDB's 400 KB, so the entries of one step
share :data:`MAX_INPUT_BYTES`; a result larger than its share is replaced by a marker that
names the job whose full result the API returns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from leasehold.core.jobs import Job

#: The budget for all dependency entries of one step, split evenly between its dependencies
#: (evenly, so an entry never depends on the order in which dependencies finish).
MAX_INPUT_BYTES = 64 * 1024
#: The row attribute holding ``{dependency step id: entry as JSON text}``.
ATTRIBUTE = "inputs"


def share(dependency_count: int) -> int:
    return MAX_INPUT_BYTES // max(1, dependency_count)


def entry(job: Job, limit: int) -> str:
    """The JSON entry for a finished dependency, at most ``limit`` bytes."""
    value: dict[str, Any] = {"state": job.state.value, "job_id": job.job_id}
    if job.error is not None and job.state.value != "SUCCEEDED":
        value["error"] = {"type": job.error.type, "message": job.error.message[:500]}
    result_json = job.result_json if job.result_json is not None else "null"
    # The result is spliced in as the JSON text the worker stored: no decode/encode round trip.
    text = _dump(value)[:-1] + ',"result":' + result_json + "}"
    if len(text.encode()) <= limit:
        return text
    value["truncated"] = True
    value["result_bytes"] = len(result_json.encode())
    marker = _dump(value)
    if len(marker.encode()) > limit:  # a very wide fan-in: the error message must go too
        value.pop("error", None)
        marker = _dump(value)
    return marker


def _dump(value: Mapping[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def decode(raw: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """``{step id: {"state", "job_id", "result", ["error"], ["truncated"]}}`` from a row."""
    return {step: json.loads(text) for step, text in (raw or {}).items()}


def step_inputs(ctx: Any) -> dict[str, dict[str, Any]]:
    """In a step's handler: its dependencies' entries, keyed by step id.

    ``ctx`` is the :class:`~leasehold.core.context.JobContext` the handler received. Each entry has
    ``state`` (``SUCCEEDED``, or ``DEAD``/``CANCELLED`` for a dependency whose failure policy
    let this step run), ``result``, ``job_id``, ``error`` for failures, and
    ``truncated: true`` when the result was too large to pass along (fetch the job instead).
    """
    return decode(ctx.extra.get(ATTRIBUTE))


def step_results(ctx: Any) -> dict[str, Any]:
    """In a step's handler: ``{dependency step id: its result}`` (None for failures)."""
    return {step: value.get("result") for step, value in step_inputs(ctx).items()}
