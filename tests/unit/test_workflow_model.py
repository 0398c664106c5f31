"""Parsing a workflow's JSON, the inputs a step receives, and the tree the CLI draws."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leasehold.core.jobs import Job, JobError
from leasehold.core.registry import TaskRegistry
from leasehold.core.states import JobState
from leasehold.errors import PayloadTooLarge, ValidationError
from leasehold.workflows import FailurePolicy, parse_workflow
from leasehold.workflows.inputs import MAX_INPUT_BYTES, entry, share
from leasehold.workflows.model import MAX_STEP_PAYLOAD_BYTES, prepare
from leasehold.workflows.tree import render


@pytest.fixture
def tasks() -> TaskRegistry:
    registry = TaskRegistry()
    registry.task("ok")(lambda payload, ctx: None)
    return registry


def test_a_step_is_parsed_with_its_policy_retry_and_timeout() -> None:
    spec = parse_workflow({"name": "etl", "steps": [
        {"id": "a", "task": "ok", "failure_policy": "continue", "timeout": 30,
         "retry": {"max_attempts": 2, "min_backoff_seconds": 5}}]}, tenant="t1")
    step = spec.steps[0]
    assert spec.tenant == "t1"
    assert step.failure_policy is FailurePolicy.CONTINUE
    assert step.timeout_seconds == 30 and step.max_attempts == 2
    assert step.retry is not None and step.retry.min_backoff_seconds == 5


@pytest.mark.parametrize(("body", "field"), [
    ({"steps": "a"}, "steps"),
    ({"steps": [], "extra": 1}, "extra"),
    ({"steps": [{"id": "a", "task": "ok", "failure_policy": "retry"}]},
     "steps[0].failure_policy"),
    ({"steps": [{"id": "a", "task": "ok", "colour": "red"}]}, "steps[0].colour"),
    ({"steps": [{"id": "a", "task": "ok", "retry": {"jitter": 1}}]}, "steps[0].retry.jitter"),
])
def test_malformed_json_is_refused_naming_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        parse_workflow(body)
    assert caught.value.field == field


def test_a_steps_job_fields_are_validated_naming_the_step(tasks: TaskRegistry) -> None:
    spec = parse_workflow({"steps": [{"id": "a", "task": "ok"},
                                     {"id": "b", "task": "ok", "pool": "gpu"}]})
    with pytest.raises(ValidationError, match="step 'b': unknown pool") as caught:
        prepare(spec, tasks, pools=("default",), now=0)
    assert caught.value.field == "steps[1].pool"
    big = parse_workflow({"steps": [{"id": "a", "task": "ok",
                                     "payload": "x" * MAX_STEP_PAYLOAD_BYTES}]})
    with pytest.raises(PayloadTooLarge, match="step 'a'"):
        prepare(big, tasks, pools=("default",), now=0)


def test_the_fingerprint_changes_with_the_graph_not_with_time(tasks: TaskRegistry) -> None:
    def fingerprint(body: dict[str, Any], now: int) -> str:
        return prepare(parse_workflow(body), tasks, pools=("default",), now=now).spec_hash

    chain = {"steps": [{"id": "a", "task": "ok"}, {"id": "b", "task": "ok",
                                                   "depends_on": ["a"]}]}
    apart = {"steps": [{"id": "a", "task": "ok"}, {"id": "b", "task": "ok"}]}
    assert fingerprint(chain, 0) == fingerprint(chain, 60_000)
    assert fingerprint(chain, 0) != fingerprint(apart, 0)


def _job(state: JobState, result: Any = None, error: JobError | None = None) -> Job:
    return Job(job_id="J1", tenant="t", task="ok", payload_json="null", pool="default",
               priority="normal", state=state, epoch=1,
               result_json=None if result is None else json.dumps(result), error=error)


def test_an_input_entry_carries_the_result_or_a_marker_when_too_large() -> None:
    small = json.loads(entry(_job(JobState.SUCCEEDED, {"n": 1}), share(1)))
    assert small == {"state": "SUCCEEDED", "job_id": "J1", "result": {"n": 1}}
    limit = share(100)
    assert limit == MAX_INPUT_BYTES // 100
    text = entry(_job(JobState.SUCCEEDED, "x" * limit), limit)
    assert len(text.encode()) <= limit
    assert json.loads(text) == {"state": "SUCCEEDED", "job_id": "J1", "truncated": True,
                                "result_bytes": limit + 2}


def test_an_input_entry_of_a_failed_dependency_carries_its_error() -> None:
    failed = _job(JobState.DEAD, error=JobError(type="Boom", message="it broke"))
    value = json.loads(entry(failed, share(1)))
    assert value["state"] == "DEAD" and value["result"] is None
    assert value["error"] == {"type": "Boom", "message": "it broke"}


def test_the_tree_draws_a_diamond_with_a_back_reference() -> None:
    view = {"workflow_id": "W1", "name": "etl", "state": "RUNNING", "steps": [
        {"id": "a", "task": "ok", "state": "SUCCEEDED", "depends_on": []},
        {"id": "b", "task": "ok", "state": "RUNNING", "depends_on": ["a"]},
        {"id": "c", "task": "ok", "state": "SUCCEEDED", "depends_on": ["a"]},
        {"id": "d", "task": "merge", "state": "WAITING", "depends_on": ["b", "c"],
         "waiting_for": 1},
    ]}
    assert render(view) == "\n".join([
        "etl W1  RUNNING",
        "└── a  SUCCEEDED  [ok]",
        "    ├── b  RUNNING  [ok]",
        "    │   └── d  WAITING  [merge]  after b, c  (waiting for 1)",
        "    └── c  SUCCEEDED  [ok]",
        "        └── d  ↑ (shown above)",
    ])
