"""A pytest plugin ``make mutants`` loads into each run (``-p tests.mutants.verdicts``): it
writes, to the file named by ``LEASEHOLD_MUTANT_VERDICTS``, one line per test that did not
pass, saying what stopped it, so that only a real test failure counts as a kill.

* ``failed``: the test's own code failed (an assertion, an exception of the code under
  test): the mutant was caught;
* ``unreplayed``: the test's own code failed, and Hypothesis, replaying that example, did
  not see it fail again (:class:`hypothesis.errors.FlakyFailure`, the failure inside it):
  the mutant was caught (a check of the code under test failed), by an example that does
  not replay exactly (the machine's moto runs SQS on the real clock);
* ``flaky``: Hypothesis gave up on the test itself (:class:`hypothesis.errors.Flaky` with no
  failure of the test inside: data generation that behaved differently between runs): it
  proves nothing about the mutant;
* ``health-check``: a Hypothesis health check failed (:class:`FailedHealthCheck`);
* ``error``: another of Hypothesis's own errors (an invalid argument or definition, an
  unsatisfiable strategy), or a set-up or tear-down of a fixture that failed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterator
from typing import Any

import pytest
from hypothesis.errors import FailedHealthCheck, Flaky, FlakyFailure, HypothesisException

VERDICTS = "LEASEHOLD_MUTANT_VERDICTS"


def kind(error: BaseException, when: str) -> str:
    """What stopped a test that raised ``error`` in its ``when`` phase."""
    if isinstance(error, FlakyFailure) and when == "call" and any(
            not isinstance(e, HypothesisException) for e in _leaves(error)):
        return "unreplayed"
    if isinstance(error, Flaky):
        return "flaky"
    if isinstance(error, FailedHealthCheck):
        return "health-check"
    if isinstance(error, HypothesisException) or when != "call":
        return "error"
    return "failed"


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    where = os.environ.get(VERDICTS)
    if where and report.failed and call.excinfo is not None:
        error = call.excinfo.value
        line = {"test": item.nodeid, "when": call.when, "kind": kind(error, call.when),
                "error": f"{type(error).__module__}.{type(error).__qualname__}"}
        with open(where, "a") as out:
            out.write(json.dumps(line) + "\n")
    return report
