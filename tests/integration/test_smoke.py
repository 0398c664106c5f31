from leasehold.app import Leasehold
from leasehold.consumer import consume
from leasehold.registry import TaskRegistry
from leasehold.spec import JobSpec
from leasehold.states import JobState
from leasehold.submission import submit
from leasehold.worker import Worker


def test_a_submitted_job_runs_once_and_succeeds_with_its_result(
    app: Leasehold, registry: TaskRegistry
) -> None:
    calls = []

    @registry.task("echo")
    def echo(payload, ctx):
        calls.append(ctx.attempt)
        return {"echo": payload}

    job = submit(app, JobSpec(task="echo", payload={"x": 1})).job
    assert job.state is JobState.QUEUED
    url = app.queues.url("default", "normal")
    consume(Worker(app), app.queues.receive(url))
    done = app.store.get(job.job_id)
    assert done.state is JobState.SUCCEEDED
    assert done.result == {"echo": {"x": 1}}
    assert calls == [1]
    assert [t.target for t in done.history] == ["QUEUED", "RUNNING", "SUCCEEDED"]
