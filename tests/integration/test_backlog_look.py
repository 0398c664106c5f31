"""The backlog limit's look at SQS: one at a time, and while it runs the other submissions
answer from the last look rather than wait for it (bench/profile_api.py found the wait a
tenth of the API's time under load)."""

from __future__ import annotations

import threading

from leasehold.aws.counting import RequestCounter
from leasehold.lifecycle.app import Leasehold
from leasehold.tenancy.backlog import Backlog


def test_a_look_under_way_is_not_waited_for_once_there_was_one(app: Leasehold) -> None:
    backlog = Backlog(ttl_seconds=0)  # every call finds its last look expired
    counter = RequestCounter().attach(app.clients)
    assert backlog.size(app, "default") == 0  # the first look is waited for
    looks = counter.snapshot().requests["sqs.GetQueueAttributes"]
    assert looks == 3  # one per priority
    held = threading.Event()
    done = threading.Event()

    def slow_look() -> None:  # another submission's look, under way
        with backlog._looking:
            held.set()
            done.wait(5)

    looker = threading.Thread(target=slow_look)
    looker.start()
    held.wait(5)
    try:
        assert backlog.size(app, "default") == 0  # the last look, at once
        assert counter.snapshot().requests["sqs.GetQueueAttributes"] == looks
    finally:
        done.set()
        looker.join()
    assert backlog.size(app, "default") == 0  # free again: it looks
    assert counter.snapshot().requests["sqs.GetQueueAttributes"] == 2 * looks

