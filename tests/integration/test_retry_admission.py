"""A manual retry and a dead-letter redrive put finished jobs back live through admission.

Both used to take the tenant's slot with an unconditional ``ADD live +1`` (the slot
companion), with no cap and no token: a tenant at its cap of 1 ended with 5 live jobs. Now
each re-queue spends a token and takes the slot under the cap in its own transaction, so a
retry over the limit answers 429, a redrive moves what fits and says what it left, and the
slot count stays exact under lost responses and throttles on that transaction.
"""

from __future__ import annotations

from typing import Any

import pytest

from leasehold.aws.dynamo import from_av
from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import NonRetryableError
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import COUNTED, submit
from leasehold.tenancy.counters import counts, slot_item

from .api_client import ApiClient, api_for
from .helpers import deliver, inject, live_counted_jobs, lost_past_retries, tenant_live


@pytest.fixture
def tasks(registry: TaskRegistry) -> TaskRegistry:
    registry.task("echo")(lambda payload, ctx: payload)

    @registry.task("doomed", max_attempts=1)
    def doomed(payload: Any, ctx: Any) -> Any:
        raise NonRetryableError("doomed")

    return registry


def _dead_jobs(api: ApiClient, count: int, tenant: str = "default") -> list[str]:
    """``count`` DEAD jobs of ``tenant``, submitted and run one at a time (under any cap)."""
    ids = []
    for _ in range(count):
        reply = api.post("/jobs", {"task": "doomed"}, tenant=tenant)
        assert reply.status == 201, reply.body
        deliver(api.app)
        ids.append(reply.body["job_id"])
    assert all(api.app.store.get(i).state is JobState.DEAD for i in ids)
    return ids


def _exact(app: Leasehold, tenant: str = "default") -> int:
    """The tenant's live counter, asserted equal to its live admitted jobs (no slot leaked)."""
    live = tenant_live(app, tenant)
    assert live == live_counted_jobs(app, tenant)
    return live


def test_a_retry_over_the_live_job_cap_answers_429_and_leaves_the_job_dead(
        app: Leasehold, tasks: TaskRegistry) -> None:
    api = api_for(app, max_live=1)
    dead = _dead_jobs(api, 5)
    holder = api.post("/jobs", {"task": "echo"}).body["job_id"]  # the tenant's one slot
    for job_id in dead:
        refused = api.post(f"/jobs/{job_id}/retry")
        assert refused.status == 429, refused.body
        assert refused.body["error"]["code"] == "rate_limited"
        assert "live jobs" in refused.body["error"]["message"]
        assert refused.headers["Retry-After"]
        assert app.store.get(job_id).state is JobState.DEAD
    assert _exact(app) == 1  # 5 retries at a cap of 1: still one live job
    assert deliver(app) == 1 and app.store.get(holder).state is JobState.SUCCEEDED
    retried = api.post(f"/jobs/{dead[0]}/retry")  # the slot is free again
    assert retried.status == 200 and retried.body["state"] == "QUEUED"
    assert _exact(app) == 1
    assert api.post(f"/jobs/{dead[1]}/retry").status == 429


def test_a_retry_spends_a_token_like_a_submission(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry) -> None:
    api = api_for(app, rate=0.01, burst=3)  # 3 requests, then one per 100 s
    [job_id] = _dead_jobs(api, 1)
    assert api.post(f"/jobs/{job_id}/retry").status == 200
    deliver(app)
    assert api.post(f"/jobs/{job_id}/retry").status == 200
    deliver(app)
    limited = api.post(f"/jobs/{job_id}/retry")
    assert limited.status == 429 and "rate" in limited.body["error"]["message"]
    assert app.store.get(job_id).state is JobState.DEAD
    clock.advance(100)
    assert api.post(f"/jobs/{job_id}/retry").status == 200


def test_a_redrive_at_the_cap_moves_what_fits_and_says_what_it_left(
        app: Leasehold, tasks: TaskRegistry) -> None:
    api = api_for(app, max_live=1)
    dead = _dead_jobs(api, 5)
    holder = api.post("/jobs", {"task": "echo"}).body["job_id"]
    report = api.post("/dead-letters/redrive", {"pool": "default"})
    assert report.status == 200
    assert report.body["redriven"] == []
    assert report.body["left_in_place"] == 5
    assert "live jobs" in report.body["left_because"]
    assert report.body["retry_after_seconds"] > 0
    assert _exact(app) == 1
    assert all(app.store.get(i).state is JobState.DEAD for i in dead)

    deliver(app)  # the holder finishes: one slot
    assert app.store.get(holder).state is JobState.SUCCEEDED
    report = api.post("/dead-letters/redrive", {"pool": "default"})
    assert len(report.body["redriven"]) == 1 and report.body["left_in_place"] == 4
    assert _exact(app) == 1  # a redrive of 5 at a cap of 1: one live job


def test_a_redrive_spends_a_token_per_job_and_stops_at_the_rate(
        app: Leasehold, tasks: TaskRegistry) -> None:
    api = api_for(app, rate=0.01, burst=7)  # 5 submissions leave 2 tokens
    _dead_jobs(api, 5)
    report = api.post("/dead-letters/redrive", {"pool": "default"}).body
    assert len(report["redriven"]) == 2 and report["left_in_place"] == 3
    assert "rate" in report["left_because"]
    assert _exact(app) == 2


@pytest.mark.parametrize("fault", ["lose", "throttle", "failed-past-retries",
                                   "lost-past-retries"])
def test_a_retry_whose_transaction_is_lost_or_throttled_leaks_no_slot(
        app: Leasehold, clock: FakeClock, tasks: TaskRegistry, fault: str) -> None:
    api = api_for(app, max_live=1)
    [job_id] = _dead_jobs(api, 1)
    transaction = "dynamodb.TransactWriteItems"
    if fault == "lost-past-retries":  # it lands; the caller sees an error past the retries
        injector = lost_past_retries(app, transaction)
    else:
        # A throttle botocore retries, or a refusal as its retries run out (nothing written).
        kind = {"lose": "lose", "throttle": "throttle", "failed-past-retries": "fail"}[fault]
        injector = inject(app, Fault(target=transaction, kind=kind, times=3 if
                                     kind == "throttle" else 1))
    injector.throttle_delay = 0
    reply = api.post(f"/jobs/{job_id}/retry")
    assert sum(injector.injected.values()) >= 1
    if fault.endswith("past-retries"):
        assert reply.status == 500
        reply = api.post(f"/jobs/{job_id}/retry")  # the caller tries again
        if fault == "lost-past-retries":  # the first one landed: the job is queued
            assert reply.status == 409
    else:
        assert reply.status == 200
    assert app.store.get(job_id).state is JobState.QUEUED
    assert _exact(app) == 1  # one slot, taken once
    assert api.post("/jobs", {"task": "echo"}).status == 429  # and it is held
    if fault == "lost-past-retries":  # nothing sent it: the sweeper's outbox pass does
        clock.advance(app.settings.handoff_seconds + 10)
        sweeper.sweep(app)
    deliver(app)
    assert _exact(app) == 0
    outcomes, live = counts(app, "default")
    assert (outcomes["DEAD"], outcomes["SUCCEEDED"], live) == (1, 0, 0)  # it died again


@pytest.mark.parametrize("kind", ["lose", "throttle"])
def test_a_redrive_under_lost_responses_and_throttles_leaks_no_slot(
        app: Leasehold, tasks: TaskRegistry, kind: str) -> None:
    api = api_for(app, max_live=3)
    dead = _dead_jobs(api, 5)
    injector = inject(app, Fault(target="dynamodb.TransactWriteItems", kind=kind, times=None,
                                 rate=0.5), seed=3)
    injector.throttle_delay = 0
    report = api.post("/dead-letters/redrive", {"pool": "default"}).body
    assert sum(injector.injected.values()) >= 1
    assert len(report["redriven"]) == 3 and report["left_in_place"] == 2
    assert _exact(app) == 3
    injector.faults.clear()
    deliver(app)
    assert _exact(app) == 0
    outcomes, _ = counts(app, "default")
    assert outcomes["DEAD"] == len(dead)  # every one died again, each counted once


def test_a_retry_on_a_sharded_tenant_takes_its_slot_and_its_outcome_back_exactly(
        app: Leasehold, tasks: TaskRegistry) -> None:
    api = api_for(app, rate=1000, burst=1000, max_live=4)  # 4 items of one slot each
    ids = [api.post("/jobs", {"task": "doomed"}).body["job_id"] for _ in range(4)]
    deliver(app)
    api.post("/jobs", {"task": "echo"})  # holds one of the four items' slot
    statuses = [api.post(f"/jobs/{job_id}/retry").status for job_id in ids]
    assert sorted(statuses) == [200, 200, 200, 429]
    assert _exact(app) == 4
    items = app.clients.dynamodb.scan(TableName=app.settings.tenants_table)["Items"]
    for item in items:  # no item counts below zero, whichever item a retry landed on
        assert all(int(v["N"]) >= 0 for k, v in item.items() if k.startswith("count_")), item
    deliver(app)
    assert _exact(app) == 0
    outcomes, _ = counts(app, "default", admission_shards=4)
    assert (outcomes["DEAD"], outcomes["SUCCEEDED"]) == (4, 1)


def _ledgers(app: Leasehold, tenant: str, state: str) -> tuple[int, int]:
    """``count_<state>`` summed over the tenant's admission items (the exact ledger of the
    jobs that hold slots) and over its outcome items (the observer's, of the others)."""
    items = [from_av(item) for item in app.clients.dynamodb.scan(
        TableName=app.settings.tenants_table)["Items"]]
    admission = sum(int(i.get(f"count_{state}", 0)) for i in items
                    if i["tenant"] in {slot_item(tenant, s) for s in range(8)})
    outcomes = sum(int(i.get(f"count_{state}", 0)) for i in items
                   if str(i["tenant"]).startswith(f"{tenant}#outcomes#"))
    return admission, outcomes


def test_a_library_job_retried_under_a_cap_is_taken_back_from_the_outcome_items(
        app: Leasehold, tasks: TaskRegistry) -> None:
    """The state machine's seed 3203...529: a library job of a capped tenant (uncounted)
    died, was redriven through admission (counted now) and died again. Its first death was
    counted by the observer on an outcome item; the re-run took it back from the admission
    item, which then counted 0 DEAD against 1 counted DEAD job (and the outcome items 1
    against none), for good."""
    api = api_for(app, max_live=2)
    job_id = submit(app, JobSpec(task="doomed", tenant="acme")).job.job_id
    deliver(app)
    assert app.store.get(job_id).state is JobState.DEAD
    assert _ledgers(app, "acme", "DEAD") == (0, 1)  # uncounted: the observer's

    report = api.post("/dead-letters/redrive", {"pool": "default"}, tenant="acme")
    assert report.body["redriven"] == [job_id], report.body
    assert app.store.get(job_id).extra.get(COUNTED) is True
    assert _ledgers(app, "acme", "DEAD") == (0, 0)
    deliver(app)
    assert app.store.get(job_id).state is JobState.DEAD
    # The counted job's death is on the admission items, and nothing else is counted.
    assert _ledgers(app, "acme", "DEAD") == (1, 0)
    assert counts(app, "acme")[0]["DEAD"] == 1
    assert _exact(app, "acme") == 0


@pytest.mark.parametrize("same_item", [False, True], ids=["any-item", "its-own-item"])
def test_a_counted_job_retried_after_its_cap_was_lifted_moves_its_outcome_to_the_observer(
        app: Leasehold, tasks: TaskRegistry, monkeypatch: pytest.MonkeyPatch,
        same_item: bool) -> None:
    """The other crossing: a counted job's death is on its admission item; re-run without a
    cap it holds no slot, so the observer counts its next end and takes back the first on
    the outcome items. The admission item gives that first death up in the re-run.

    ``its-own-item``: the retry's token lands on the very item that counted the death (a
    random draw, 1 in the tenant's shard count, forced here). The outcome taken back and the
    token were two operations on one item of one transaction, which DynamoDB refuses: the
    retry answered 500. Now the outcome rides on the token's own update."""
    if same_item:
        from leasehold.tenancy import admission
        monkeypatch.setattr(admission.random, "sample",
                            lambda population, k: sorted(population)[:k])  # shard 0 first
    [job_id] = _dead_jobs(api_for(app, max_live=2), 1, tenant="acme")
    assert _ledgers(app, "acme", "DEAD") == (1, 0)
    reply = api_for(app, max_live=None).post(f"/jobs/{job_id}/retry", tenant="acme")
    assert reply.status == 200, reply.body
    assert app.store.get(job_id).extra.get(COUNTED) is False
    assert _ledgers(app, "acme", "DEAD") == (0, 0)
    deliver(app)
    assert _ledgers(app, "acme", "DEAD") == (0, 1)
    assert counts(app, "acme")[0]["DEAD"] == 1
