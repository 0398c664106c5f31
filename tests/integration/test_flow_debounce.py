"""Debounce: a burst of submissions with one key is one run, with the latest payload, due
``seconds`` after the last submission and never later than ``max_wait_seconds`` after the
first; racing submissions and lost responses still make one run."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from leasehold.aws.faults import Fault
from leasehold.clock import FakeClock
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.errors import ValidationError
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.tenancy.listing import list_jobs

from .api_client import ApiClient
from .helpers import deliver, inject

RUNS: Counter[str] = Counter()
PAYLOADS: list[Any] = []


@pytest.fixture(autouse=True)
def tasks(registry: TaskRegistry) -> None:
    RUNS.clear()
    PAYLOADS.clear()

    def rebuild(payload: Any, ctx: Any) -> Any:
        RUNS[ctx.job_id] += 1
        PAYLOADS.append(payload)
        return payload

    registry.task("rebuild", debounce={"key": "doc:{payload.doc}", "seconds": 10,
                                       "max_wait_seconds": 25})(rebuild)


@pytest.fixture
def undelayed(app: Leasehold, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hand-offs visible at once (moto waits SQS delays out in real time): every epoch's
    message reaches the worker, so only the fencing decides what runs."""
    send = app.queues.send
    monkeypatch.setattr(app.queues, "send", lambda pool, priority, message, delay_seconds=0,
                        **kw: send(pool, priority, message, 0, **kw))


def edit(app: Leasehold, n: int, doc: str = "d1") -> Any:
    return submit(app, JobSpec(task="rebuild", payload={"doc": doc, "n": n}))


def test_a_burst_is_one_run_with_the_latest_payload_pushed_out_and_capped(
    app: Leasehold, clock: FakeClock, undelayed: None,
) -> None:
    start = app.now()
    first = edit(app, 1)
    assert first.created and first.job.run_at == start + 10_000
    clock.advance(5)
    second = edit(app, 2)
    assert second.coalesced and second.job.job_id == first.job.job_id
    assert second.job.run_at == start + 15_000  # 10 s after the last
    other = edit(app, 1, doc="d2")  # another key: its own window
    assert other.created
    clock.advance(9)
    third = edit(app, 3)
    assert third.job.run_at == start + 24_000
    clock.advance(9)
    fourth = edit(app, 4)
    assert fourth.job.run_at == start + 25_000  # capped: 25 s after the first
    clock.advance(1)
    fifth = edit(app, 5)  # capped already: only the payload changes, no new hand-off
    assert (fifth.job.run_at, fifth.job.epoch) == (start + 25_000, fourth.job.epoch)
    deliver(app)
    assert Counter({first.job.job_id: 1, other.job.job_id: 1}) == RUNS
    assert {"doc": "d1", "n": 5} in PAYLOADS
    after = edit(app, 6)  # the window was leased and ran: the next edit opens another
    assert after.created and after.job.job_id != first.job.job_id
    deliver(app)
    assert RUNS[after.job.job_id] == 1 and RUNS[first.job.job_id] == 1


def test_two_racing_submissions_make_one_window(
    app: Leasehold, monkeypatch: pytest.MonkeyPatch, undelayed: None,
) -> None:
    """Fixed interleaving: the rival opens the window between our read and our write."""
    original = app.store.create
    rivals: list[Any] = []

    def rival_first(job: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(app.store, "create", original)
        rivals.append(edit(app, 1))
        return original(job, **kwargs)

    monkeypatch.setattr(app.store, "create", rival_first)
    mine = edit(app, 2)
    [rival] = rivals
    assert rival.created and mine.coalesced and mine.job.job_id == rival.job.job_id
    deliver(app)
    assert Counter({rival.job.job_id: 1}) == RUNS and PAYLOADS == [{"doc": "d1", "n": 2}]


def test_lost_responses_in_a_burst_still_make_one_run(
    app: Leasehold, clock: FakeClock, undelayed: None,
) -> None:
    inject(app, Fault(target="dynamodb.TransactWriteItems|dynamodb.UpdateItem|"
                             "dynamodb.PutItem", kind="lose", rate=0.5, times=None))
    answers = []
    for n in range(6):
        answers.append(edit(app, n))
        clock.advance(1)
    assert len({a.job.job_id for a in answers}) == 1
    deliver(app)
    jobs, _ = list_jobs(app, "default", limit=10)
    assert [j.state for j in jobs] == [JobState.SUCCEEDED]
    assert sum(RUNS.values()) == 1 and PAYLOADS == [{"doc": "d1", "n": 5}]


def test_debounce_refuses_what_would_change_its_window(app: Leasehold) -> None:
    with pytest.raises(ValidationError, match="idempotency_key"):
        submit(app, JobSpec(task="rebuild", payload={"doc": "x"}, idempotency_key="k"))
    with pytest.raises(ValidationError, match=r"debounce\.seconds"):
        submit(app, JobSpec(task="rebuild", payload={"doc": "x"},
                            debounce={"key": "k", "seconds": 3600}))
    with pytest.raises(ValidationError, match=r"payload\.doc"):
        submit(app, JobSpec(task="rebuild", payload={}))
    assert list_jobs(app, "default", limit=10)[0] == []


def test_the_clients_retry_token_is_ignored_for_a_debounced_task_and_kept_for_others(
    app: Leasehold, registry: TaskRegistry,
) -> None:
    registry.task("plain")(lambda payload, ctx: payload)
    api = ApiClient(app)
    # The task's debounce decides: the token is dropped, and a repeat of the same token
    # joins the window that carried the first (one job).
    first = api.post("/jobs", {"task": "rebuild", "payload": {"doc": "d9", "n": 1}},
                     headers={"Idempotency-Key": "client-1"})
    again = api.post("/jobs", {"task": "rebuild", "payload": {"doc": "d9", "n": 1}},
                     headers={"Idempotency-Key": "client-1"})
    assert (first.status, again.status) == (201, 200), (first.body, again.body)
    assert again.body["job_id"] == first.body["job_id"] and again.body["coalesced"]
    # Without debounce the token is the submission's idempotency key: a replay answers it.
    plain = api.post("/jobs", {"task": "plain", "payload": 1},
                     headers={"Idempotency-Key": "client-2"})
    replay = api.post("/jobs", {"task": "plain", "payload": 1},
                      headers={"Idempotency-Key": "client-2"})
    assert (plain.status, replay.status) == (201, 200)
    assert replay.body["job_id"] == plain.body["job_id"]
    assert app.store.get(plain.body["job_id"]).idempotency_key == "client-2"
    # The body's own key still cannot be combined with debounce: it asks for an identity.
    refused = api.post("/jobs", {"task": "rebuild", "payload": {"doc": "d9", "n": 2},
                                 "idempotency_key": "mine"})
    assert refused.status == 422 and refused.body["error"]["field"] == "debounce"
    unknown = api.post("/jobs", {"task": "nope"}, headers={"Idempotency-Key": "client-3"})
    assert unknown.status == 422 and unknown.body["error"]["field"] == "task"
