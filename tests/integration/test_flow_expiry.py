"""Start windows: a job not started by its deadline ends EXPIRED, never runs, and gives back
what it holds, whether a worker meets it (its lease is refused) or the sweeper does."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.core.flowcontrol import GATE, START_BY
from leasehold.core.policy import RetryPolicy
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import ValidationError
from leasehold.flow import key_usage as keys
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.tenancy.admission import Limits, submit_admitted
from leasehold.tenancy.counters import counts

from .flow_helpers import flow_item
from .helpers import deliver, inject, receive_all, submit_swept, tenant_live
from .liveness import assert_every_live_job_can_wake, messages_in_queues

RUNS: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def tasks(registry: TaskRegistry) -> None:
    RUNS.clear()

    def run(payload: Any, ctx: Any) -> Any:
        RUNS[ctx.job_id] += 1
        if ctx.attempt <= payload.get("fail_first", 0):
            raise RuntimeError("planned")
        return payload

    registry.task("soon", start_within_seconds=5,
                  retry=RetryPolicy(min_backoff_seconds=0, max_backoff_seconds=0))(run)


def test_a_job_not_started_in_its_window_expires_at_the_lease_and_gives_back_what_it_holds(
    app: Leasehold, clock: FakeClock,
) -> None:
    limits = Limits(rate=100, burst=100, max_live=5)
    late = submit_admitted(app, JobSpec(task="soon", tenant="acme", unique={"key": "u"},
                                        payload={}), "default", limits).job
    # Its own value overrides the task's: this one may wait a minute.
    patient = submit_admitted(app, JobSpec(task="soon", tenant="acme", payload={},
                                           start_within_seconds=60), "default", limits).job
    # Lost responses on every write of the expiry: each retry meets its own write.
    inject(app, Fault(target="dynamodb.TransactWriteItems", kind="lose", times=3))
    clock.advance(6)
    deliver(app)
    expired = app.store.get(late.job_id)
    assert expired.state is JobState.EXPIRED and RUNS[late.job_id] == 0
    assert expired.attempt == 0 and expired.started_at is None
    assert expired.history[-1].source == "QUEUED" and expired.history[-1].target == "EXPIRED"
    assert app.store.get(patient.job_id).state is JobState.SUCCEEDED
    assert tenant_live(app, "acme") == 0  # the slot went back with the expiry
    assert flow_item(app, "acme", "unique", "u") is None  # and the unique claim
    assert counts(app, "acme")[0]["EXPIRED"] == 1


def test_a_job_started_in_its_window_is_never_expired_by_its_retries(
    app: Leasehold, clock: FakeClock,
) -> None:
    job = submit(app, JobSpec(task="soon", payload={"fail_first": 1})).job
    deliver(app, once=True)  # attempt 1 fails inside the window
    clock.advance(30)
    deliver(app)
    assert app.store.get(job.job_id).state is JobState.SUCCEEDED
    assert RUNS[job.job_id] == 2


def test_the_sweeper_expires_a_job_left_in_its_queue_and_its_late_message_runs_nothing(
    app: Leasehold, clock: FakeClock,
) -> None:
    job = submit(app, JobSpec(task="soon", payload={})).job
    clock.advance(5 + app.settings.skew_grace_seconds + 1)
    report = sweeper.sweep(app)
    assert report.ended == 1
    assert app.store.get(job.job_id).state is JobState.EXPIRED
    deliver(app)  # the message that sat in the queue
    assert RUNS[job.job_id] == 0 and app.store.get(job.job_id).state is JobState.EXPIRED


def test_an_expiry_before_the_start_or_with_a_window_too_is_refused(app: Leasehold) -> None:
    now = app.now()
    with pytest.raises(ValidationError, match="expires_at"):
        submit(app, JobSpec(task="soon", delay_seconds=60, expires_at_ms=now + 30_000))
    with pytest.raises(ValidationError, match="not both"):
        submit(app, JobSpec(task="soon", start_within_seconds=1, expires_at_ms=now + 30_000))
    with pytest.raises(ValidationError, match="start_within_seconds"):
        submit(app, JobSpec(task="soon", start_within_seconds=-1))


@pytest.mark.parametrize("hold", ["paused key", "full key", "throttle"])
def test_a_job_held_by_its_key_expires_at_its_start_window_and_gives_back_its_slot(
    app: Leasehold, clock: FakeClock, registry: TaskRegistry, hold: str,
) -> None:
    key = {"key": "k", "limit": 1}
    registry.task("keyed", concurrency=key)(lambda payload, ctx: RUNS.update([ctx.job_id]))
    registry.task("rated", throttle={"key": "r", "limit": 1, "period_seconds": 60})(
        lambda payload, ctx: RUNS.update([ctx.job_id]))
    task = "rated" if hold == "throttle" else "keyed"
    if hold == "paused key":
        keys.pause(app, "acme", "k")
    elif hold == "full key":  # a job of the key RUNNING (its worker is slow)
        holder = submit_swept(app, JobSpec(task="keyed", tenant="acme", payload={})).job
        [message] = receive_all(app)
        app.store.lease(holder.job_id, holder.epoch, owner="w", now=app.now(), actor="w",
                        expires_at=app.now() + 3_600_000, gate=holder.extra[GATE])
        app.queues.delete(message.queue_url, [message.receipt_handle])
    else:  # another job took the key's one turn a minute
        submit(app, JobSpec(task="rated", tenant="acme", payload={}))
        deliver(app)
    limits = Limits(rate=100, burst=100, max_live=5)
    job = submit_admitted(app, JobSpec(task=task, tenant="acme", payload={},
                                       start_within_seconds=5), "default", limits).job
    start_by = job.extra[START_BY]
    # Lost responses on the write that makes it wait and on its expiry.
    injector = inject(app, Fault(
        target="dynamodb.TransactWriteItems|dynamodb.UpdateItem", kind="lose", times=2,
        when=lambda params: any(word in json.dumps(params)
                                for word in ("waiting_for", "EXPIRED"))))
    deliver(app)
    waiting = app.store.get(job.job_id)
    assert waiting.state is JobState.QUEUED and waiting.extra["waiting_for"]
    # Whatever holds it, the sweeper looks at it no later than its start window's end.
    assert waiting.lease_expires_at is not None and waiting.lease_expires_at <= start_by
    paths = assert_every_live_job_can_wake(app, in_flight=messages_in_queues(app))[job.job_id]
    assert any(path.kind == "sweep" and path.at is not None and path.at <= start_by
               for path in paths), paths
    assert tenant_live(app, "acme") == 1
    clock.advance(5 + app.settings.skew_grace_seconds + 1)
    assert sweeper.sweep(app).ended == 1
    expired = app.store.get(job.job_id)
    assert expired.state is JobState.EXPIRED and RUNS[job.job_id] == 0
    assert tenant_live(app, "acme") == 0  # its live slot went back with the expiry
    assert sum(injector.injected.values()) == 2  # both responses were lost
    if hold == "paused key":
        keys.resume(app, "acme", "k")  # wakes nothing: the job is gone from the parked index
        deliver(app)
        assert app.store.get(job.job_id).state is JobState.EXPIRED and RUNS[job.job_id] == 0
