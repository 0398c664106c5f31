import random
import statistics

import pytest

from leasehold.core.policy import RetryPolicy, backoff, backoff_cap, decide_retry
from leasehold.errors import ValidationError

POLICY = RetryPolicy(min_backoff_seconds=1, max_backoff_seconds=60)


@pytest.mark.parametrize(
    ("failures", "cap"), [(1, 1), (2, 2), (3, 4), (4, 8), (6, 32), (7, 60), (50, 60), (500, 60)]
)
def test_backoff_cap_doubles_per_failure_up_to_the_maximum(failures: int, cap: float) -> None:
    assert backoff_cap(POLICY, failures) == cap


def test_backoff_is_jittered_within_its_bounds_and_grows_on_average() -> None:
    rng = random.Random(1)
    means = []
    for failures in range(1, 8):
        samples = [backoff(POLICY, failures, rng) for _ in range(400)]
        assert all(1 <= s <= backoff_cap(POLICY, failures) for s in samples)
        if failures > 1:
            assert len(set(samples)) > 300  # jittered, not a fixed schedule
        means.append(statistics.mean(samples))
    assert means == sorted(means)


@pytest.mark.parametrize(
    ("attempt", "max_attempts", "age_s", "types", "retry", "reason"),
    [
        (1, 3, 0, ("ValueError",), True, "retry after backoff"),
        (3, 3, 0, ("ValueError",), False, "attempts exhausted (3/3)"),
        (1, 3, 0, ("NonRetryableError", "LeaseholdError"), False, "non-retryable"),
        (1, 3, 0, ("KeyError", "LookupError"), False, "non-retryable error KeyError"),
        (1, 3, 120, ("ValueError",), False, "retry age exhausted"),
    ],
)
def test_retry_decisions(attempt: int, max_attempts: int, age_s: int, types: tuple[str, ...],
                         retry: bool, reason: str) -> None:
    policy = RetryPolicy(min_backoff_seconds=1, max_backoff_seconds=10,
                         max_retry_age_seconds=100, non_retryable=("LookupError",))
    decision = decide_retry(policy, attempt=attempt, max_attempts=max_attempts,
                            first_attempt_at_ms=0, now_ms=age_s * 1000, error_types=types,
                            rng=random.Random(3))
    assert decision.retry is retry
    assert reason in decision.reason
    if retry:
        assert 1 <= decision.delay_seconds <= 10


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"min_backoff_seconds": -1}, "retry.min_backoff_seconds"),
        ({"min_backoff_seconds": 10, "max_backoff_seconds": 5}, "retry.max_backoff_seconds"),
        ({"max_retry_age_seconds": 0}, "retry.max_retry_age_seconds"),
        ({"non_retryable": ("not a name",)}, "retry.non_retryable"),
    ],
)
def test_invalid_retry_policies_name_their_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        RetryPolicy(**kwargs)
    assert info.value.field == field


def test_retry_policy_round_trips_through_its_dict_form() -> None:
    policy = RetryPolicy(min_backoff_seconds=2, max_backoff_seconds=30,
                         max_retry_age_seconds=600, non_retryable=("KeyError",))
    assert RetryPolicy.from_dict(policy.to_dict()) == policy
    with pytest.raises(ValidationError) as info:
        RetryPolicy.from_dict({"min_backoff_seconds": "soon"})
    assert info.value.field == "retry.min_backoff_seconds"


@pytest.mark.parametrize(("not_before", "delay"), [
    (1_000_000 + 2_000, 2.0),        # a Retry-After of 2 s: exactly, not the backoff
    (1_000_000 - 5_000, 0.0),        # a time already past: now
    (1_000_000 + 10**12, 86_400.0),  # beyond a day: a day
])
def test_a_failure_s_own_next_attempt_time_replaces_the_backoff(
        not_before: int, delay: float) -> None:
    from leasehold.core.policy import RetryPolicy, decide_retry
    policy = RetryPolicy(min_backoff_seconds=3600, max_backoff_seconds=3600)
    decision = decide_retry(policy, attempt=1, max_attempts=3, first_attempt_at_ms=1_000_000,
                            now_ms=1_000_000, error_types=("HTTP429",),
                            not_before_ms=not_before)
    assert decision.retry and decision.delay_seconds == delay
    spent = decide_retry(policy, attempt=3, max_attempts=3, first_attempt_at_ms=1_000_000,
                         now_ms=1_000_000, error_types=("HTTP429",), not_before_ms=not_before)
    assert not spent.retry  # the attempts still bound it
