from typing import Any

import pytest

from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import MAX_PAYLOAD_BYTES, JobSpec, resolve
from leasehold.errors import PayloadTooLarge, ValidationError

NOW = 1_767_225_600_000


@pytest.fixture
def tasks() -> TaskRegistry:
    registry = TaskRegistry()
    registry.task("echo", timeout_seconds=20, max_attempts=4, pool="default")(lambda p, c: p)
    return registry


def resolved(tasks: TaskRegistry, **kwargs: Any):
    return resolve(JobSpec(**{"task": "echo", **kwargs}), tasks, pools=("default", "gpu"),
                   now_ms=NOW)


def test_defaults_come_from_the_task_and_the_delay_sets_run_at(tasks: TaskRegistry) -> None:
    spec = resolved(tasks, payload={"a": [1, 2]}, delay_seconds=90)
    assert (spec.pool, spec.priority, spec.max_attempts, spec.timeout_seconds) == (
        "default", "normal", 4, 20)
    assert spec.run_at_ms == NOW + 90_000
    assert spec.payload_json == '{"a":[1,2]}'


def test_run_at_in_the_past_means_now(tasks: TaskRegistry) -> None:
    assert resolved(tasks, run_at_ms=NOW - 5_000).run_at_ms == NOW


def test_the_spec_hash_changes_with_the_payload_but_not_with_the_clock(tasks: TaskRegistry) -> None:
    a = resolved(tasks, payload=1, delay_seconds=10)
    b = resolve(JobSpec(task="echo", payload=1, delay_seconds=10), tasks, pools=("default",),
                now_ms=NOW + 60_000)
    c = resolved(tasks, payload=2, delay_seconds=10)
    assert a.spec_hash == b.spec_hash != c.spec_hash


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"task": "nope"}, "task"),
        ({"task": ""}, "task"),
        ({"task": 5}, "task"),
        ({"payload": {1, 2}}, "payload"),
        ({"payload": float("nan")}, "payload"),
        ({"pool": "unknown"}, "pool"),
        ({"pool": "Bad Pool"}, "pool"),
        ({"priority": "urgent"}, "priority"),
        ({"delay_seconds": -1}, "delay_seconds"),
        ({"delay_seconds": "10"}, "delay_seconds"),
        ({"delay_seconds": 400 * 86400}, "delay_seconds"),
        ({"delay_seconds": 1, "run_at_ms": NOW}, "run_at"),
        ({"run_at_ms": NOW + 400 * 86400 * 1000}, "run_at"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"idempotency_key": "a\nb"}, "idempotency_key"),
        ({"idempotency_key": "k" * 300}, "idempotency_key"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 1.5}, "max_attempts"),
        ({"max_attempts": True}, "max_attempts"),
        ({"timeout_seconds": 0}, "timeout_seconds"),
        ({"retry": {"min_backoff_seconds": 1}}, "retry"),
        ({"tenant": "a b"}, "tenant"),
        ({"tenant": ""}, "tenant"),
        ({"labels": ["x"]}, "labels"),
        ({"labels": {"k": 1}}, "labels.k"),
        ({"labels": {"bad key": "v"}}, "labels"),
        ({"labels": {f"k{i}": "v" for i in range(40)}}, "labels"),
    ],
)
def test_every_invalid_value_names_its_field(tasks: TaskRegistry, kwargs: dict, field: str
                                             ) -> None:
    with pytest.raises(ValidationError) as info:
        resolved(tasks, **kwargs)
    assert info.value.field == field
    assert field in str(info.value)


def test_an_oversized_payload_is_a_clear_error(tasks: TaskRegistry) -> None:
    with pytest.raises(PayloadTooLarge) as info:
        resolved(tasks, payload="x" * MAX_PAYLOAD_BYTES)
    assert info.value.field == "payload"
    assert "limit is 262144" in str(info.value)


def test_a_payload_just_under_the_limit_is_accepted(tasks: TaskRegistry) -> None:
    assert resolved(tasks, payload="x" * (MAX_PAYLOAD_BYTES - 2)).payload_json


def test_an_explicit_retry_policy_wins_over_the_task_default(tasks: TaskRegistry) -> None:
    policy = RetryPolicy(min_backoff_seconds=5, max_backoff_seconds=50)
    assert resolved(tasks, retry=policy).retry == policy


def test_a_timeout_above_its_pools_limit_is_refused_naming_the_field(tasks: TaskRegistry) -> None:
    limits = {"default": 290.0}
    with pytest.raises(ValidationError) as refused:
        resolve(JobSpec(task="echo", timeout_seconds=295), tasks, pools=("default", "gpu"),
                now_ms=NOW, timeout_limits=limits)
    assert refused.value.field == "timeout_seconds"
    assert "290" in str(refused.value)
    # At the limit, and in a pool without one, the same timeout is fine.
    assert resolve(JobSpec(task="echo", timeout_seconds=290), tasks, pools=("default",),
                   now_ms=NOW, timeout_limits=limits).timeout_seconds == 290
    assert resolve(JobSpec(task="echo", pool="gpu", timeout_seconds=3600), tasks,
                   pools=("default", "gpu"), now_ms=NOW, timeout_limits=limits).pool == "gpu"


def test_a_tasks_default_timeout_gives_way_to_its_pools_limit(tasks: TaskRegistry) -> None:
    """Only an explicit timeout is refused: the task's default becomes the pool's longest."""
    spec = resolve(JobSpec(task="echo"), tasks, pools=("default",), now_ms=NOW,
                   timeout_limits={"default": 15.0})
    assert spec.timeout_seconds == 15
