"""The registry shows a worker's jobs in progress only, not its batch's finished ones."""

from __future__ import annotations

from typing import Any

from leasehold.core.registry import TaskRegistry
from leasehold.core.spec import JobSpec
from leasehold.core.states import JobState
from leasehold.lifecycle import fleet
from leasehold.lifecycle.app import Leasehold
from leasehold.lifecycle.submission import submit
from leasehold.polling.poller import PollerOptions, PollingWorker


def test_a_finished_job_leaves_the_workers_list_before_its_batch_ends(
        app: Leasehold, registry: TaskRegistry) -> None:
    poller = PollingWorker(app, PollerOptions(batch_size=10, wait_seconds=0))
    seen: dict[str, Any] = {}

    @registry.task("step")
    def step(payload: Any, ctx: Any) -> Any:
        # Each job of the one batch looks at what the worker says it runs, and at the registry.
        poller.beat()
        [listed] = fleet.live_workers(app)
        seen[payload] = (ctx.job_id, poller.current_jobs(), listed.current_jobs)
        return payload

    ids = [submit(app, JobSpec(task="step", payload=name)).job.job_id
           for name in ("first", "second", "third")]
    assert poller.poll_once() == 3  # one batch of three, run one after the other
    assert len(seen) == 3
    for job_id, current, listed in seen.values():
        assert current == [job_id]  # not its batch-mates, finished or not yet started
        assert listed == (job_id,)
    assert all(job.state is JobState.SUCCEEDED for job in app.store.batch_get(ids))
    assert poller.current_jobs() == []
    poller.beat()
    assert [w.current_jobs for w in fleet.live_workers(app)] == [()]
