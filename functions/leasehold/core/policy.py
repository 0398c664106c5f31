"""Retry policy and the pure decisions made from it: backoff, retry or give up."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from leasehold.core.durations import check_seconds
from leasehold.errors import ValidationError

MAX_BACKOFF_SECONDS = 86_400
MAX_RETRY_AGE_SECONDS = 366 * 86_400


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """Cloud Tasks-style bounds: exponential backoff with full jitter inside [min, max]."""

    min_backoff_seconds: float = 1.0
    max_backoff_seconds: float = 300.0
    #: Stop retrying once the job is this old (from its first attempt), whatever attempts remain.
    max_retry_age_seconds: float | None = None
    #: Exception type names (the class or any base) that fail the job at once.
    non_retryable: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Each stored as a DynamoDB number: 0 or at least a millisecond (core.durations).
        check_seconds("retry.min_backoff_seconds", self.min_backoff_seconds,
                      high=MAX_BACKOFF_SECONDS, zero_ok=True)
        if not self.min_backoff_seconds <= self.max_backoff_seconds <= MAX_BACKOFF_SECONDS:
            raise ValidationError(
                "retry.max_backoff_seconds", "must be between min_backoff_seconds and 86400"
            )
        check_seconds("retry.max_backoff_seconds", self.max_backoff_seconds,
                      high=MAX_BACKOFF_SECONDS, zero_ok=True)
        if self.max_retry_age_seconds is not None:
            check_seconds("retry.max_retry_age_seconds", self.max_retry_age_seconds,
                          high=MAX_RETRY_AGE_SECONDS)
        for name in self.non_retryable:
            if not isinstance(name, str) or not name.isidentifier():
                raise ValidationError("retry.non_retryable", f"not an exception name: {name!r}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "min_backoff_seconds": self.min_backoff_seconds,
            "max_backoff_seconds": self.max_backoff_seconds,
            "max_retry_age_seconds": self.max_retry_age_seconds,
            "non_retryable": list(self.non_retryable),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RetryPolicy:
        known = {"min_backoff_seconds", "max_backoff_seconds", "max_retry_age_seconds",
                 "non_retryable"}
        unknown = set(data) - known
        if unknown:
            raise ValidationError(f"retry.{sorted(unknown)[0]}", "unknown field")
        values = dict(data)
        for name in ("min_backoff_seconds", "max_backoff_seconds", "max_retry_age_seconds"):
            value = values.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValidationError(f"retry.{name}", "must be a number")
            values[name] = float(value)
        if values.get("max_retry_age_seconds") is None:
            values.pop("max_retry_age_seconds", None)
        if "non_retryable" in values:
            names = values["non_retryable"]
            if not isinstance(names, list | tuple):
                raise ValidationError("retry.non_retryable", "must be a list of names")
            values["non_retryable"] = tuple(names)
        return cls(**{k: v for k, v in values.items() if v is not None})


def backoff_cap(policy: RetryPolicy, failures: int) -> float:
    """The upper bound of the delay after the ``failures``-th failure (1-based)."""
    exponent = min(max(failures - 1, 0), 62)
    return min(policy.max_backoff_seconds, policy.min_backoff_seconds * (2**exponent))


def backoff(policy: RetryPolicy, failures: int, rng: random.Random | None = None) -> float:
    """Full jitter between the floor and a cap that doubles with each failure."""
    cap = backoff_cap(policy, failures)
    return (rng or random).uniform(policy.min_backoff_seconds, cap)


def is_non_retryable(policy: RetryPolicy, error_types: tuple[str, ...]) -> bool:
    """``error_types`` is the failing exception's class name followed by its bases'."""
    return "NonRetryableError" in error_types or any(
        name in policy.non_retryable for name in error_types
    )


@dataclass(frozen=True)
class RetryDecision:
    retry: bool
    delay_seconds: float = 0.0
    reason: str = ""


def decide_retry(
    policy: RetryPolicy,
    *,
    attempt: int,
    max_attempts: int,
    first_attempt_at_ms: int,
    now_ms: int,
    error_types: tuple[str, ...],
    rng: random.Random | None = None,
    not_before_ms: int | None = None,
) -> RetryDecision:
    """Retry after a delay, or give up with the reason why.

    ``not_before_ms``: the failure's own next-attempt time (a ``Retry-After``): the retry is
    due exactly then (now if it has passed, at most :data:`MAX_BACKOFF_SECONDS` ahead)
    instead of after the backoff; the attempts and the retry age still bound it.
    """
    if is_non_retryable(policy, error_types):
        return RetryDecision(False, reason=f"non-retryable error {error_types[0]}")
    if attempt >= max_attempts:
        return RetryDecision(False, reason=f"attempts exhausted ({attempt}/{max_attempts})")
    if not_before_ms is not None:
        delay = min(max(0.0, (not_before_ms - now_ms) / 1000), float(MAX_BACKOFF_SECONDS))
        reason = "retry at the time the failure asked for"
    else:
        delay = backoff(policy, attempt, rng)
        reason = "retry after backoff"
    if policy.max_retry_age_seconds is not None:
        age = (now_ms - first_attempt_at_ms) / 1000 + delay
        if age > policy.max_retry_age_seconds:
            return RetryDecision(
                False, reason=f"retry age exhausted ({policy.max_retry_age_seconds:g}s)"
            )
    return RetryDecision(True, delay_seconds=delay, reason=reason)
