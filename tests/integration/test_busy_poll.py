"""A busy polling worker does not short-poll queues it just found empty (issue 21).

While busy the worker short-polls its pool's three queues in weighted order until one has
messages; with all the work on one priority that was two or three receives per batch.
"""

from __future__ import annotations

from leasehold.aws.counting import RequestCounter
from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.polling.poller import PollerOptions, PollingWorker


def test_a_busy_worker_with_work_on_one_queue_makes_about_one_receive_per_batch(
        app: Leasehold, registry: TaskRegistry) -> None:
    registry.task("echo")(lambda payload, ctx: payload)
    for n in range(12):
        submit(app, JobSpec(task="echo", payload=n))
    worker = PollingWorker(app, PollerOptions(batch_size=1, skip_empty_seconds=60))
    counter = RequestCounter().attach(app.clients)
    assert sum(worker.poll_once() for _ in range(12)) == 12
    receives = counter.snapshot().requests["sqs.ReceiveMessage"]
    assert receives <= 12 + 2, receives  # the first round may ask high and low once each
    high = submit(app, JobSpec(task="echo", priority="high")).job
    worker.options.skip_empty_seconds = 0
    worker._empty_until.clear()  # the skip ran out: high is asked again
    assert worker.poll_once() == 1
    assert app.store.get(high.job_id).state.value == "SUCCEEDED"
