"""Changing durable code (issue 36): a replay keeps the order of the recorded calls, stops as
``NonDeterministic`` on a renamed, reordered or removed step (never answering a call with
another's result), allows a step added at the end, and ``ctx.patched`` lets old and new runs
both finish. Through moto, the real worker and a fake clock; a "deploy" switches the code a
task runs (``code["v"]``)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.core.context import JobContext
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.durable import records, replay
from leasehold.events.publishing import job_event
from leasehold.lifecycle import control
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.time.ticker import promote_due

from .api_client import ApiClient
from .helpers import deliver, inject, whole_error
from .test_client_operations import client_for

FAST = RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0)


@pytest.fixture
def code() -> dict[str, Any]:
    return {"v": "old"}


@pytest.fixture
def ran() -> list[str]:
    return []


@pytest.fixture
def tasks(registry: TaskRegistry, code: dict[str, Any], ran: list[str]) -> TaskRegistry:
    def work(name: str) -> Any:
        return lambda: ran.append(name) or f"{name} done"

    @registry.task("order", retry=FAST)
    def order(payload: Any, ctx: JobContext) -> Any:
        v = code["v"]
        if v == "old":
            out = [ctx.step("charge", work("charge")), ctx.step("pack", work("pack"))]
            ctx.sleep(7200)
            return [*out, ctx.step("ship", work("ship"))]
        if v == "renamed":
            out = [ctx.step("bill", work("bill")), ctx.step("pack", work("pack"))]
        elif v == "reordered":
            out = [ctx.step("pack", work("pack")), ctx.step("charge", work("charge"))]
        elif v == "removed":
            out = [ctx.step("charge", work("charge"))]
        elif v == "swallowing":  # catches the mismatch and goes on
            try:
                out = [ctx.step("bill", work("bill"))]
            except Exception:
                out = [ctx.step("fallback", work("fallback"))]
        elif v == "patched":
            # The rename, deployed safely: old runs keep "charge", new runs take "bill".
            first = ctx.step("bill", work("bill")) if ctx.patched("rename-charge") else \
                ctx.step("charge", work("charge"))
            out = [first, ctx.step("pack", work("pack"))]
        else:  # "added": a step at the end
            out = [ctx.step("charge", work("charge")), ctx.step("pack", work("pack"))]
            ctx.sleep(7200)
            return [*out, ctx.step("ship", work("ship")), ctx.step("notify", work("notify"))]
        ctx.sleep(7200)
        return [*out, ctx.step("ship", work("ship"))]

    @registry.task("last_removed", retry=FAST)
    def last_removed(payload: Any, ctx: JobContext) -> Any:
        first = ctx.step("charge", work("charge"))
        if code["v"] == "old":
            ctx.step("receipt", work("receipt"))
            if ctx.attempt == 1:
                raise ConnectionError("after the receipt")
        return first

    return registry


def _asleep(app: Leasehold, clock: FakeClock, task: str = "order") -> str:
    job = submit(app, JobSpec(task=task)).job
    deliver(app)
    assert app.store.get(job.job_id).state in (JobState.SLEEPING, JobState.QUEUED)
    return job.job_id


def _wake(app: Leasehold, clock: FakeClock) -> None:
    clock.advance(7201)
    promote_due(app)
    deliver(app)


def _seqs(app: Leasehold, job_id: str) -> dict[int, str]:
    return {int(r["seq"]): sk for sk, r in records.load(app, job_id).items()}


@pytest.mark.parametrize(("version", "expected", "found"), [
    ("renamed", "step 'charge'", "step 'bill'"),
    ("reordered", "step 'charge'", "step 'pack'"),
    ("removed", "step 'pack'", "sleep #1"),
])
def test_a_replay_that_meets_another_call_stops_non_deterministic_and_runs_nothing(
    app: Leasehold, tasks: TaskRegistry, code: dict[str, Any], ran: list[str],
    clock: FakeClock, version: str, expected: str, found: str,
) -> None:
    job_id = _asleep(app, clock)
    assert _seqs(app, job_id) == {0: "step#charge", 1: "step#pack", 2: "sleep#1"}
    code["v"] = version
    ran.clear()
    _wake(app, clock)
    dead = app.store.get(job_id)
    assert dead.state is JobState.DEAD and dead.attempt == 1  # non-retryable: no retry
    assert dead.error is not None and dead.error.type == "NonDeterministic"
    assert f"has {expected} at durable call" in whole_error(app, dead).message
    assert f"the code called {found} there" in whole_error(app, dead).message
    # No step body ran, none was answered with another's result, nothing was written.
    assert ran == []
    assert dead.result is None
    assert _seqs(app, job_id) == {0: "step#charge", 1: "step#pack", 2: "sleep#1"}


def test_a_handler_that_catches_the_mismatch_cannot_go_on_past_it(
    app: Leasehold, tasks: TaskRegistry, code: dict[str, Any], ran: list[str],
    clock: FakeClock,
) -> None:
    job_id = _asleep(app, clock)
    code["v"] = "swallowing"
    ran.clear()
    _wake(app, clock)
    dead = app.store.get(job_id)
    assert dead.state is JobState.DEAD and dead.error is not None
    assert dead.error.type == "NonDeterministic" and "step 'bill'" in whole_error(app, dead).message
    assert ran == []  # neither "bill" nor the fallback ran
    assert _seqs(app, job_id) == {0: "step#charge", 1: "step#pack", 2: "sleep#1"}


def test_a_removed_last_step_stops_the_return_and_the_retry_path_fixes_it(
    app: Leasehold, tasks: TaskRegistry, code: dict[str, Any], ran: list[str],
) -> None:
    job = submit(app, JobSpec(task="last_removed")).job
    deliver(app, once=True)  # charge, receipt, then a retryable failure
    assert app.store.get(job.job_id).state is JobState.QUEUED
    code["v"] = "new"
    deliver(app)
    dead = app.store.get(job.job_id)
    assert dead.state is JobState.DEAD and dead.error is not None
    assert dead.error.type == "NonDeterministic"
    assert "step 'receipt' at durable call 2" in whole_error(app, dead).message
    assert "returned before calling it" in whole_error(app, dead).message
    assert dead.result is None
    # The operator deploys code that makes the recorded calls again and retries the job.
    code["v"] = "old"
    control.retry(app, job.job_id, "default", actor="cli")
    deliver(app)
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED and done.result == "charge done"
    assert ran == ["charge", "receipt"]  # each ran once


def test_a_step_added_at_the_end_is_new_work_recorded_after_the_history(
    app: Leasehold, tasks: TaskRegistry, code: dict[str, Any], ran: list[str],
    clock: FakeClock,
) -> None:
    job_id = _asleep(app, clock)
    code["v"] = "added"
    _wake(app, clock)
    done = app.store.get(job_id)
    assert done.state is JobState.SUCCEEDED, done.error
    assert done.result == ["charge done", "pack done", "ship done", "notify done"]
    assert ran == ["charge", "pack", "ship", "notify"]
    assert _seqs(app, job_id) == {0: "step#charge", 1: "step#pack", 2: "sleep#1",
                                  3: "step#ship", 4: "step#notify"}


def test_patched_keeps_old_runs_on_the_old_branch_and_new_runs_on_the_new(
    app: Leasehold, tasks: TaskRegistry, code: dict[str, Any], ran: list[str],
    clock: FakeClock,
) -> None:
    old = _asleep(app, clock)  # its history has "charge": it predates the patch
    code["v"] = "renamed"
    _wake(app, clock)
    assert app.store.get(old).state is JobState.DEAD
    # The fix: the rename behind ctx.patched, deployed; the stopped job retried by hand.
    code["v"] = "patched"
    control.retry(app, old, "default", actor="cli")
    new = _asleep(app, clock)
    _wake(app, clock)
    assert app.store.get(old).state is JobState.SUCCEEDED
    assert app.store.get(old).result == ["charge done", "pack done", "ship done"]
    assert app.store.get(new).state is JobState.SUCCEEDED
    assert app.store.get(new).result == ["bill done", "pack done", "ship done"]
    # The old run took no place for its False answer; the new one recorded the marker.
    assert _seqs(app, old) == {0: "step#charge", 1: "step#pack", 2: "sleep#1", 3: "step#ship"}
    assert _seqs(app, new) == {0: "patch#rename-charge", 1: "step#bill", 2: "step#pack",
                               3: "sleep#1", 4: "step#ship"}
    assert ran.count("charge") == 1 and ran.count("bill") == 1


def test_a_lost_response_on_a_record_write_during_replay_records_it_once_in_its_place(
    app: Leasehold, tasks: TaskRegistry, code: dict[str, Any], ran: list[str],
    clock: FakeClock,
) -> None:
    job_id = _asleep(app, clock)
    code["v"] = "added"
    # The replay's new records (ship, notify): each lands and its response is lost, past
    # botocore's retries once and retried into its own condition once.
    injector = inject(app)
    injector.faults[:] = [Fault(target="dynamodb.TransactWriteItems", kind="lose-raise"),
                          Fault(target="dynamodb.TransactWriteItems", kind="lose")]
    _wake(app, clock)
    done = app.store.get(job_id)
    assert done.state is JobState.SUCCEEDED, done.error
    assert ran == ["charge", "pack", "ship", "notify"]  # each once
    assert _seqs(app, job_id) == {0: "step#charge", 1: "step#pack", 2: "sleep#1",
                                  3: "step#ship", 4: "step#notify"}


# -- the replay check, the history endpoint, code versions, the patch listing ----------------

def _history(app: Leasehold, job_id: str, tenant: str = "default") -> dict[str, Any]:
    reply = ApiClient(app).get(f"/jobs/{job_id}/history", tenant=tenant)
    assert reply.status == 200, reply.body
    return dict(reply.body)


def test_the_replay_check_finds_the_breaking_change_without_running_a_step(
    app: Leasehold, tasks: TaskRegistry, code: dict[str, Any], ran: list[str],
    clock: FakeClock,
) -> None:
    job_id = _asleep(app, clock)
    document = _history(app, job_id)
    assert [(r["seq"], r["kind"], r["name"]) for r in document["records"]] == [
        (0, "step", "charge"), (1, "step", "pack"), (2, "sleep", "1")]
    ran.clear()
    assert replay.replay(tasks, document).ok  # the code it was recorded with
    code["v"] = "renamed"
    verdict = replay.replay(tasks, document)
    assert not verdict.ok and verdict.outcome == "non_deterministic"
    assert "step 'charge' at durable call 1" in verdict.detail and "step 'bill'" in verdict.detail
    code["v"] = "patched"
    verdict = replay.replay(tasks, document)
    assert verdict.ok and verdict.patches == {"rename-charge": False}, verdict
    code["v"] = "added"  # a step added after the history's end is new work: fine
    assert replay.replay(tasks, document).ok
    assert ran == []  # no step's function ran in any replay
    # A task the code no longer has, and a document from a file, are checked too.
    gone = {**document, "job": {**document["job"], "task": "vanished"}}
    assert replay.replay(tasks, gone).outcome == "unknown_task"
    code["v"] = "renamed"
    (from_file,) = replay.parse_lines(json.dumps(document) + "\n\n")
    assert replay.replay(tasks, from_file).outcome == "non_deterministic"


def test_the_history_of_another_tenant_s_job_is_not_found(
    app: Leasehold, tasks: TaskRegistry, clock: FakeClock,
) -> None:
    job_id = _asleep(app, clock)
    assert ApiClient(app).get(f"/jobs/{job_id}/history", tenant="other").status == 404


def test_each_job_keeps_the_code_version_that_first_ran_it_and_each_attempt_its_own(
    app: Leasehold, tasks: TaskRegistry, code: dict[str, Any], clock: FakeClock,
) -> None:
    app.settings = dataclasses.replace(app.settings, code_version="v1")
    job_id = _asleep(app, clock)
    app.settings = dataclasses.replace(app.settings, code_version="v2")
    _wake(app, clock)
    view = ApiClient(app).get(f"/jobs/{job_id}", tenant="default").body
    assert view["state"] == "SUCCEEDED" and view["code_version"] == "v1"
    assert [h.get("code_version") for h in view["history"] if h["reason"] == "lease"] == \
        ["v1", "v2"]
    event = job_event(app.store.get(job_id), JobState.RUNNING, app.now())["detail"]
    assert event["code_version"] == "v1" and event["attempt_code_version"] == "v2"
    other = submit(app, JobSpec(task="order")).job.job_id
    deliver(app)  # first run by v2
    client = client_for(app, "default")  # the client (and so the CLI's --code-version)
    assert {j["job_id"] for j in client.list(code_version="v1")["jobs"]} == {job_id}
    assert {j["job_id"] for j in client.list(code_version="v2")["jobs"]} == {other}
    assert client_for(app, "other").list(code_version="v1")["jobs"] == []


def test_the_patch_listing_finds_the_live_jobs_that_predate_the_patch(
    app: Leasehold, tasks: TaskRegistry, code: dict[str, Any], clock: FakeClock,
) -> None:
    api = ApiClient(app)

    def needing() -> set[str]:
        reply = api.get("/jobs?patch=rename-charge", tenant="default")
        assert reply.status == 200, reply.body
        return {j["job_id"] for j in reply.body["jobs"]}

    app.settings = dataclasses.replace(app.settings, code_version="v1")
    old = _asleep(app, clock)  # old code: its history predates the patch
    assert needing() == {old}
    app.settings = dataclasses.replace(app.settings, code_version="v2")
    code["v"] = "patched"
    new = _asleep(app, clock)  # new code: it recorded the patch's marker
    assert needing() == {old}
    assert [j["job_id"] for j in client_for(app, "default").list(patch="rename-charge")["jobs"]] \
        == [old]
    assert client_for(app, "other").list(patch="rename-charge")["jobs"] == []
    assert client_for(app, "default").history(old)["records"][0]["name"] == "charge"
    _wake(app, clock)  # both finish; nothing live needs the old branch any more
    assert app.store.get(old).state is JobState.SUCCEEDED
    assert app.store.get(new).state is JobState.SUCCEEDED
    assert needing() == set()
    assert api.get("/jobs?patch=bad id", tenant="default").status == 422
