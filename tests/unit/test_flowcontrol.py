"""Flow-control options as a job, a task default and a workflow step give them (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.core.flowcontrol import gate, render_key
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec, resolve
from leasehold.errors import ValidationError
from leasehold.workflows.model import parse_workflow, prepare


@pytest.mark.parametrize(("template", "payload", "key"), [
    ("stripe:{payload.account_id}", {"account_id": "acct_1"}, "stripe:acct_1"),
    ("{payload.a.b}-{payload.n}", {"a": {"b": "x"}, "n": 7}, "x-7"),
    ("fixed", None, "fixed"),
])
def test_a_key_template_renders_over_the_payload(template: str, payload: Any, key: str) -> None:
    assert render_key("concurrency.key", template, payload) == key


@pytest.mark.parametrize(("template", "payload", "message"), [
    ("stripe:{payload.account_id}", {}, "no field 'account_id'"),
    ("{payload.a}", {"a": {"nested": 1}}, "must be a string or a number"),
    ("{account_id}", {"account_id": 1}, "names payload fields"),
])
def test_a_template_naming_a_missing_field_is_refused(template: str, payload: Any,
                                                      message: str) -> None:
    with pytest.raises(ValidationError, match=message) as caught:
        render_key("concurrency.key", template, payload)
    assert caught.value.field == "concurrency.key"


def test_keys_are_scoped_to_the_tenant_and_a_job_value_beats_the_task_default() -> None:
    task = {"concurrency": {"key": "k", "limit": 2}, "throttle": None}
    mine = gate("acme", None, job={"concurrency": None, "throttle": None}, task=task)
    theirs = gate("zeta", None, job={"concurrency": None, "throttle": None}, task=task)
    assert mine is not None and theirs is not None
    assert mine["concurrency"]["slot"] != theirs["concurrency"]["slot"]
    own = gate("acme", None, job={"concurrency": {"key": "j", "limit": 5}, "throttle": None},
               task=task)
    assert own is not None and own["concurrency"] == {"key": "j", "slot": "acme#flow#j",
                                                      "limit": 5}
    assert gate("acme", None, job={}, task={}) is None  # no option: nothing to pay


def test_throttle_burst_defaults_to_its_limit_and_bad_values_name_their_field() -> None:
    made = gate("t", None, job={"throttle": {"key": "k", "limit": 3, "period_seconds": 2}},
                task={})
    assert made is not None and made["throttle"]["burst"] == 3
    assert made["throttle"]["period_ms"] == 2000
    with pytest.raises(ValidationError) as caught:
        gate("t", None, job={"concurrency": {"key": "k", "limit": 0}}, task={})
    assert caught.value.field == "concurrency.limit"


def test_a_workflow_step_and_a_job_spec_carry_their_options() -> None:
    registry = TaskRegistry()
    registry.task("t")(lambda payload, ctx: None)
    spec = parse_workflow({"steps": [{"id": "a", "task": "t", "payload": {"c": "x"},
                                      "concurrency": {"key": "c:{payload.c}", "limit": 1}}]},
                          tenant="acme")
    prepared = prepare(spec, registry, pools=("default",), now=0)
    assert prepared.steps["a"].gate == {"concurrency": {"key": "c:x", "slot": "acme#flow#c:x",
                                                        "limit": 1}}
    plain = resolve(JobSpec(task="t"), registry, pools=("default",), now_ms=0)
    assert plain.gate is None
