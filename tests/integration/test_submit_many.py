"""Many jobs submitted at once send first together (issue 46): ``submit_many`` and ``POST
/jobs/batch`` gather the send-first hand-offs of ten submissions written side by side into
one ``SendMessageBatch`` sent before their rows are put, and the rows carry no ``sweep``
entry. Each fault that could strand or double such a job is injected at the botocore layer
against a real moto server: the whole call refused, one entry refused, the answer lost (the
call landed) and the process killed between the send and a put.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from typing import Any

import pytest

from leasehold.aws.counting import RequestCounter
from leasehold.aws.faults import Fault, InjectedCrash
from leasehold.clock import FakeClock
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle import sweeper
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.batches import submit_many
from leasehold.lifecycle.leasing import HandedBack
from leasehold.lifecycle.worker import Delivery, Worker

from . import liveness
from .helpers import deliver, inject, receive_all
from .test_api_batch import api_for
from .test_send_first import GRACE_S, in_sweep_index, left_in_queue
from .test_sweep_frontier import index_write_units


def specs(count: int) -> list[JobSpec]:
    return [JobSpec(task="echo", payload=i) for i in range(count)]


def sent_bodies(app: Leasehold) -> list[dict[str, Any]]:
    """The hand-offs waiting now (received, then made visible again at once)."""
    messages = receive_all(app)
    for message in messages:
        app.queues.extend(message.queue_url, message.receipt_handle, 0)
    return [json.loads(message.body) for message in messages]


def handle_each(app: Leasehold) -> Counter[str]:
    """Each message due, run as :func:`handle_one` runs one: their outcomes."""
    outcomes: Counter[str] = Counter()
    for message in receive_all(app):
        try:
            outcomes[Worker(app).process(Delivery(message.body, message.queue_url,
                                                  message.receipt_handle)).value] += 1
        except HandedBack:
            app.queues.extend(message.queue_url, message.receipt_handle, 0)
            outcomes["kept"] += 1
            continue
        app.queues.delete(message.queue_url, [message.receipt_handle])
    return outcomes


@pytest.mark.ddblocal
def test_many_plain_jobs_are_sent_ten_a_request_before_their_rows_with_no_sweep_entry(
        app: Leasehold, runs: Counter[str], backend: str) -> None:
    counter = RequestCounter().attach(app.clients)
    with index_write_units(app, "sweep") as units:
        made = submit_many(app, specs(12))
    if backend == "ddblocal":  # DynamoDB itself: the sweep index costs the jobs nothing
        assert sum(units) == 0.0, units
    sends = counter.snapshot().requests
    assert [m.job.payload for m in made] == list(range(12))  # one answer each, in order
    assert all(m.created for m in made)
    assert (sends["sqs.SendMessageBatch"], sends["sqs.SendMessage"]) == (2, 0)
    ids = [m.job.job_id for m in made]
    assert not any(in_sweep_index(app, job_id) for job_id in ids)
    # Stamped as sent first: a worker that met one before its row would keep it.
    assert all("sent" in body for body in sent_bodies(app))
    assert deliver(app) == 12
    assert all(app.store.get(job_id).state is JobState.SUCCEEDED for job_id in ids)
    assert runs == Counter(dict.fromkeys(ids, 1))


@pytest.mark.parametrize("kind", ["fail", "refuse-entry", "lose", "lose-raise"])
def test_a_refused_or_lost_batch_send_makes_those_rows_the_outbox_and_each_job_runs_once(
        app: Leasehold, clock: FakeClock, runs: Counter[str], kind: str) -> None:
    """``fail``: the first ten's call refused past botocore's retries; ``refuse-entry``: SQS
    refuses its first entry, the rest land; ``lose``: the call landed and botocore's retry
    sends it again (each message twice); ``lose-raise``: it landed, and the caller saw an
    error. A row whose message SQS did not (knowingly) take is put with its ``sweep``
    entry, and the sweeper hands it off at its deadline."""
    injector = inject(app, Fault(target="sqs.SendMessageBatch", kind=kind))
    ids = [m.job.job_id for m in submit_many(app, specs(12))]
    assert injector.injected
    outbox = {"fail": ids[:10], "refuse-entry": ids[:1], "lose": [],
              "lose-raise": ids[:10]}[kind]
    assert [job_id for job_id in ids if in_sweep_index(app, job_id)] == outbox
    deliver(app)
    clock.advance(app.settings.handoff_seconds + app.settings.skew_grace_seconds + 1)
    sweeper.sweep(app)
    deliver(app)
    assert all(app.store.get(job_id).state is JobState.SUCCEEDED for job_id in ids)
    assert runs == Counter(dict.fromkeys(ids, 1))  # a duplicate message is fenced


def test_a_process_killed_between_the_batch_send_and_the_puts_leaves_messages_kept_then_dropped(
        app: Leasehold, clock: FakeClock, runs: Counter[str]) -> None:
    injector = inject(app, Fault(target="dynamodb.PutItem", kind="crash", times=1))
    with pytest.raises(InjectedCrash):
        submit_many(app, specs(3))  # dies at a put: the puts side by side with it may land
    injector.revive()
    injector.faults.clear()
    assert len(sent_bodies(app)) == 3  # all three were sent first
    put = [r["job_id"] for r in liveness.rows(app)]
    assert len(put) < 3 and not any(in_sweep_index(app, job_id) for job_id in put)
    # A message whose row is not there may still see it land within the grace: kept.
    outcomes = handle_each(app)
    assert outcomes == Counter({"succeeded": len(put), "kept": 3 - len(put)}) - Counter()
    clock.advance(GRACE_S)
    # Past the grace its row's absence is certain: dropped, and nothing is left.
    assert handle_each(app) == Counter({"stale": 3 - len(put)}) - Counter()
    assert left_in_queue(app) == 0
    assert runs == Counter(dict.fromkeys(put, 1))


def test_a_process_killed_at_the_batch_send_leaves_nothing_and_never_hangs_the_others(
        app: Leasehold, runs: Counter[str]) -> None:
    """The thread that sends for the ten dies in the send: the others are let go (their
    puts die with the process), and nothing is left: no message, no row."""
    injector = inject(app, Fault(target="sqs.SendMessageBatch", kind="crash", times=1))
    raised: list[BaseException] = []

    def call() -> None:
        try:
            submit_many(app, specs(5))
        except BaseException as exc:  # the crash is what is looked for
            raised.append(exc)

    caller = threading.Thread(target=call, daemon=True)  # a hang fails, never stalls, the test
    caller.start()
    caller.join(60)  # not a speed check: the call takes milliseconds; a minute is never
    assert not caller.is_alive() and isinstance(raised[0], InjectedCrash)
    injector.revive()
    injector.faults.clear()
    assert sent_bodies(app) == [] and liveness.rows(app) == []


def test_a_batch_of_the_api_sends_its_plain_items_first_ten_a_request_with_no_sweep_entry(
        app: Leasehold, runs: Counter[str]) -> None:
    api = api_for(app, rate=1000, burst=1000, max_live=None)
    counter = RequestCounter().attach(app.clients)
    reply = api.post("/jobs/batch", {"jobs": [{"task": "echo", "payload": i}
                                              for i in range(25)]})
    ids = [r["job"]["job_id"] for r in reply.body["results"]]
    assert len(ids) == 25
    sends = counter.snapshot().requests
    assert (sends["sqs.SendMessageBatch"], sends["sqs.SendMessage"]) == (3, 0)
    assert not any(in_sweep_index(app, job_id) for job_id in ids)
    assert deliver(app) == 25
    assert runs == Counter(dict.fromkeys(ids, 1))


def test_keyed_items_of_many_are_put_first_with_their_entry_and_sent_after_together(
        app: Leasehold, runs: Counter[str]) -> None:
    counter = RequestCounter().attach(app.clients)
    keyed = [JobSpec(task="echo", payload=i, idempotency_key=f"k{i}") for i in range(3)]
    made = submit_many(app, [*keyed, *specs(2)])
    sends = counter.snapshot().requests
    assert (sends["sqs.SendMessageBatch"], sends["sqs.SendMessage"]) == (2, 0)
    assert [in_sweep_index(app, m.job.job_id) for m in made] == [True] * 3 + [False] * 2
    assert deliver(app) == 5
    assert runs == Counter({m.job.job_id: 1 for m in made})
    again = submit_many(app, keyed)  # a replay: the same jobs, nothing sent again
    assert [m.job.job_id for m in again] == [m.job.job_id for m in made[:3]]
    assert not any(m.created for m in again) and deliver(app) == 0
