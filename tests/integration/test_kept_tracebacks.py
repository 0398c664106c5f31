"""A retried job's row stays under 1 KB (issue 46): the row keeps an excerpt of its last
error, the whole message and traceback are kept in an item of their own, which the job view
(``GET /jobs/{id}``, and the CLI through it) reads. Before, the traceback (up to 4 KB) lay on
the row, and every later write of the row cost a unit more per started KB."""

from __future__ import annotations

from typing import Any

import pytest

from bench.metering import item_size
from leasehold.aws.definitions import job_key
from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.cli.output import show_job
from leasehold.core.jobs import Job
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.lifecycle.tracebacks import EXCERPT

from .api_client import api_for
from .helpers import deliver, inject

pytestmark = pytest.mark.ddblocal

KB = 1024
LONG = "the ledger did not balance " * 40  # over the excerpt


def _deep(depth: int, attempt: int) -> None:
    if depth:
        _deep(depth - 1, attempt)
    raise ValueError(f"attempt {attempt}: {LONG}")


@pytest.fixture
def tasks(registry: TaskRegistry) -> TaskRegistry:
    @registry.task("flaky", max_attempts=2,
                   retry=RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0))
    def flaky(payload: Any, ctx: Any) -> None:
        _deep(30, ctx.attempt)  # a traceback of kilobytes

    return registry


def _row(app: Leasehold, job_id: str) -> dict[str, Any]:
    return dict(app.clients.dynamodb.get_item(
        TableName=app.settings.jobs_table, Key=job_key(job_id),
        ConsistentRead=True)["Item"])


def test_a_retried_job_keeps_its_row_under_one_kb_and_its_view_shows_the_whole_error(
        app: Leasehold, tasks: TaskRegistry) -> None:
    sizes: list[tuple[str, int]] = []

    def measure(job: Job, source: JobState | None) -> None:
        sizes.append((job.state.value, item_size(_row(app, job.job_id))))

    app.store.observers.append(measure)
    job_id = submit(app, JobSpec(task="flaky")).job.job_id
    for _ in range(2):
        deliver(app)
    assert app.store.get(job_id).state is JobState.DEAD
    assert [s for s, _ in sizes] == ["QUEUED", "RUNNING", "QUEUED", "RUNNING", "DEAD"]
    # The retry's writes (its end as a retry, the next lease) stay under 1 KB, with a
    # message over the excerpt and a traceback of kilobytes. (The DEAD end, with its fifth
    # history entry and second attempt error, is just over: 2 units, once.)
    assert all(size < KB for _, size in sizes[:4]), sizes
    row_error = app.store.get(job_id).error
    assert row_error is not None and len(row_error.message) == EXCERPT
    assert row_error.traceback == ""

    shown = api_for(app).get(f"/jobs/{job_id}").body["error"]
    assert shown["type"] == "ValueError"
    assert shown["message"] == f"attempt 2: {LONG}"  # the last attempt's, whole
    assert "in flaky" in shown["traceback"] and "in _deep" in shown["traceback"]
    assert len(shown["traceback"]) > KB
    assert shown["traceback"].rstrip().endswith(f"ValueError: attempt 2: {LONG}".rstrip())
    assert "in _deep" in show_job({**api_for(app).get(f"/jobs/{job_id}").body})


def test_a_traceback_that_cannot_be_kept_leaves_the_excerpt_and_fails_no_attempt(
        app: Leasehold, tasks: TaskRegistry) -> None:
    """The item's put refused past botocore's retries (what a caller sees once a throttle
    outlasts them): the attempt is recorded as ever (its retry is due), the row keeps the
    excerpt, and the view shows that."""
    injector = inject(app, Fault(target="dynamodb.PutItem", kind="fail", times=None,
                                 when=lambda p: p.get("TableName") ==
                                 app.settings.coordination_table))
    job_id = submit(app, JobSpec(task="flaky")).job.job_id
    deliver(app, once=True)
    assert injector.injected
    job = app.store.get(job_id)
    assert job.state is JobState.QUEUED and job.attempt == 1
    shown = api_for(app).get(f"/jobs/{job_id}").body["error"]
    assert shown["message"] == f"attempt 1: {LONG}"[:EXCERPT]
    assert shown["traceback"] == ""


def test_a_process_killed_between_the_kept_error_and_the_row_shows_no_other_attempts(
        app: Leasehold, tasks: TaskRegistry) -> None:
    """Attempt 2's error is kept, then the process dies before the row records it: the row
    still describes attempt 1, and the view never shows attempt 2's traceback as its."""
    job_id = submit(app, JobSpec(task="flaky")).job.job_id
    deliver(app, once=True)  # attempt 1 fails, its error kept and recorded
    kept: list[bool] = []

    def watch(params: Any) -> bool:
        kept.append(str(params.get("Item", {}).get("pk", {}).get("S", "")).startswith(
            "traceback#"))
        return False  # never injected: it only sees the item's put go by

    injector = inject(
        app, Fault(target="dynamodb.PutItem", kind="fail", times=None, when=watch),
        Fault(target="dynamodb.UpdateItem", kind="crash",
              when=lambda p: any(kept) and p.get("TableName") == app.settings.jobs_table))
    with pytest.raises(InjectedCrash):
        deliver(app, once=True)
    injector.faults.clear()
    injector.revive()
    job = app.store.get(job_id)
    assert job.state is JobState.RUNNING and job.attempt == 2  # the row never heard
    shown = api_for(app).get(f"/jobs/{job_id}").body["error"]
    assert shown["message"] == f"attempt 1: {LONG}"[:EXCERPT]
    assert shown["traceback"] == ""
