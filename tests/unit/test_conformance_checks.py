"""The conformance kit's own checks, on logs its cases can write."""

from __future__ import annotations

from typing import Any

from leasehold.conformance.cases import not_from_the_last_attempt

JOB = "01M8HM23ZJPGB8VF8KDS0YS9EJKP9WDKH7A07"


def _succeeded(worker: str) -> dict[str, Any]:
    return {JOB: {"state": "SUCCEEDED", "result": {"worker_id": worker}}}


def _log(*events: tuple[str, str]) -> list[list[str]]:
    return [[event, JOB, "java", worker, str(1795887801828 + i)]
            for i, (event, worker) in enumerate(events)]


def test_a_zombie_that_starts_after_the_takeover_and_stops_is_no_attempt() -> None:
    """What CI's faulty run logged (Java): the frozen worker, woken, started the job 136 ms
    after the worker that took it over, then stopped on its lost lease; the result is the
    new owner's, as it must be."""
    logged = _log(("start", "java-3"), ("start", "java-2"), ("end", "java-3"),
                  ("cancelled", "java-2"))
    assert not_from_the_last_attempt(_succeeded("java-3"), logged) == []


def test_a_result_from_a_worker_that_did_not_run_the_last_attempt_is_caught() -> None:
    logged = _log(("start", "java-1"), ("start", "java-3"), ("end", "java-3"))
    assert not_from_the_last_attempt(_succeeded("java-1"), logged) == [JOB]
    # A zombie's result, while the owner that started after it stopped nothing: caught.
    logged = _log(("start", "java-2"), ("start", "java-3"), ("end", "java-2"),
                  ("end", "java-3"))
    assert not_from_the_last_attempt(_succeeded("java-2"), logged) == [JOB]
