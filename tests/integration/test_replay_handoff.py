"""A keyed replay hands off a job whose first submission's put landed unseen.

When the put lands but its caller sees an error past botocore's retries, the API answers 500
and sends nothing. The client replays with its idempotency key and got 200 "replay", with
nothing sent: the job waited for the sweeper's hand-off deadline (15 minutes as deployed).
Now a replay that finds the job QUEUED and never leased sends it again, due at once past a
short grace and at the grace's end within it; a duplicate message is fenced by the epoch, so
the job still runs once.
"""

from __future__ import annotations

import math
import time
from collections import Counter

import pytest

from leasehold.clock import FakeClock
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import REPLAY_GRACE_MS, submit

from .api_client import api_for
from .helpers import deliver, live_counted_jobs, lost_past_retries, receive_all, tenant_live

GRACE_S = REPLAY_GRACE_MS / 1000


def _leased_at(app: Leasehold, job_id: str) -> int:
    job = app.store.get(job_id)
    return next(t.at for t in job.history if t.target == JobState.RUNNING.value)


@pytest.mark.parametrize("via_api", [True, False])
def test_a_replay_after_a_put_lost_past_the_retries_hands_the_job_off(
        app: Leasehold, clock: FakeClock, runs: Counter[str], via_api: bool) -> None:
    api = api_for(app, max_live=1)
    body = {"task": "echo", "idempotency_key": "order-7"}
    spec = JobSpec(task="echo", idempotency_key="order-7")
    # A capped submission's row is a plain put after its slot's update (issue 46).
    injector = lost_past_retries(app, "dynamodb.PutItem")
    if via_api:
        assert api.post("/jobs", body).status == 500
        assert tenant_live(app) == live_counted_jobs(app) == 1  # the put landed, slot and all
    else:
        with pytest.raises(Exception, match="injected"):
            submit(app, spec)
    assert sum(injector.injected.values()) == 1
    assert deliver(app) == 0  # nothing was sent

    clock.advance(GRACE_S)  # the client backs off, then replays with its key
    replayed_at = clock.now_ms()
    if via_api:
        replay = api.post("/jobs", body)
        assert replay.status == 200
        job_id = replay.body["job_id"]
    else:
        replayed = submit(app, spec)
        assert not replayed.created
        job_id = replayed.job.job_id
    assert deliver(app) == 1  # handed off again: no wait for the sweeper
    assert app.store.get(job_id).state is JobState.SUCCEEDED
    assert runs[job_id] == 1
    assert _leased_at(app, job_id) - replayed_at < app.settings.handoff_seconds * 1000
    assert tenant_live(app) == live_counted_jobs(app) == 0


def test_a_replay_within_the_grace_sends_one_message_due_when_the_grace_ends(
        app: Leasehold, clock: FakeClock, runs: Counter[str]) -> None:
    api = api_for(app)
    body = {"task": "echo", "idempotency_key": "k"}
    injector = lost_past_retries(app, "dynamodb.PutItem")
    assert api.post("/jobs", body).status == 500  # landed, nothing sent
    assert sum(injector.injected.values()) == 1
    clock.advance(GRACE_S / 4)  # a client that replays a 500 at once
    replay = api.post("/jobs", body)
    assert replay.status == 200
    job_id = replay.body["job_id"]
    # Not at once (the first submission might still have been sending), but not left to the
    # sweeper's hand-off deadline either: one message, due when the grace ends.
    assert receive_all(app) == []
    time.sleep(math.floor(GRACE_S * 3 / 4) + 0.2)  # SQS's whole-second delay, real time
    clock.advance(GRACE_S * 3 / 4)
    assert deliver(app) == 1
    assert app.store.get(job_id).state is JobState.SUCCEEDED
    assert runs[job_id] == 1


def test_a_replay_racing_the_first_send_costs_one_fenced_duplicate(
        app: Leasehold, clock: FakeClock, runs: Counter[str]) -> None:
    api = api_for(app)
    body = {"task": "echo", "idempotency_key": "k"}
    job_id = api.post("/jobs", body).body["job_id"]  # sent
    clock.advance(GRACE_S / 4)
    assert api.post("/jobs", body).status == 200
    assert deliver(app) == 1  # only the first submission's message is due yet: it runs
    assert app.store.get(job_id).state is JobState.SUCCEEDED
    time.sleep(math.floor(GRACE_S * 3 / 4) + 0.2)
    clock.advance(GRACE_S * 3 / 4)
    assert deliver(app) == 1  # the replay's duplicate comes, meets a finished job ...
    assert runs[job_id] == 1  # ... and runs nothing


def test_a_replay_of_a_job_already_leased_sends_nothing(
        app: Leasehold, clock: FakeClock, runs: Counter[str]) -> None:
    api = api_for(app)
    body = {"task": "echo", "idempotency_key": "k"}
    job_id = api.post("/jobs", body).body["job_id"]
    assert len(receive_all(app)) == 1  # a worker took it ...
    job = app.store.get(job_id)
    app.store.lease(job_id, job.epoch, owner="w1", expires_at=clock.now_ms() + 30_000,
                    now=clock.now_ms(), actor="w1")  # ... and leased it
    clock.advance(GRACE_S + 10)
    assert api.post("/jobs", body).status == 200
    assert receive_all(app) == []
    assert app.store.get(job_id).state is JobState.RUNNING


def test_a_job_sent_twice_by_a_replay_runs_once(
        app: Leasehold, clock: FakeClock, runs: Counter[str]) -> None:
    api = api_for(app)
    body = {"task": "echo", "idempotency_key": "k"}
    job_id = api.post("/jobs", body).body["job_id"]
    clock.advance(GRACE_S + 1)  # no worker took it yet: the replay cannot tell, and re-sends
    assert api.post("/jobs", body).status == 200
    assert deliver(app) == 2  # both messages delivered
    done = app.store.get(job_id)
    assert (done.state, done.attempt, runs[job_id]) == (JobState.SUCCEEDED, 1, 1)
